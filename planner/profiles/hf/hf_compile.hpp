#pragma once
// torch.compile under the stacks that run Hugging Face transformers' modules (--compile): which runs it is modelled
// for, and the report's line. The mechanism lives in the rows and kernels it changes (the `compiled` condition of
// activations_hf_rows_*.hpp, loss_compiled in hf_head_ops.cpp, the fused kernels of hf_kernels.cpp); the rules
// they follow are these, from the min-cut partitioner torch.compile uses for training
// (torch/_functorch/partitioners.py, min_cut_rematerialization_partition, with its default options):
//
// - The joint forward-backward graph is split by a minimum cut between the forward and the backward, each
//   tensor's capacity its bytes: the graph saves the smallest set of tensors from which the backward can compute
//   everything it reads (solve_min_cut). A graph input (the layer's input, the logits fed to the loss) is a
//   candidate like any other.
// - Only ops on its recomputable list may be recomputed in the backward (ban_if_not_in_allowlist:
//   op_types.is_recomputable): pointwise ops, casts, views and cheap reductions (sum, mean, amax). Matmuls and
//   attention are compute-intensive (op_types.is_compute_intensive: aten.mm, _scaled_dot_product_flash_attention,
//   _scaled_dot_product_cudnn_attention, ...) and random ops (native_dropout, rand_like) are never recomputed: what
//   the backward reads of theirs (a GEMM's input and output, SDPA's q, k, v, output and log-sum-exp, a dropout's
//   mask) is saved, or recomputed from saved tensors through recomputable ops only.
// - A tensor that a backward op no kernel fuses with reads (a GEMM's weight or input gradient, SDPA's backward)
//   must exist in the backward anyway, so recomputing it is never free: it is never recomputed
//   (ban_if_materialized_backward, is_materialized_backwards). The norms' outputs and SwiGLU's product, which the
//   weight gradients of q, k, v, gate, up and down read, and under autocast the bf16 casts of the weights, which
//   the input gradients read, are saved although each is pointwise from saved tensors or parameters.
// - A reduction whose output is at least 4x smaller than its inputs is never recomputed (ban_if_reduction):
//   RMSNorm's rsqrt and the loss's logsumexp are saved.
// - Inductor fuses the recomputable ops between two such nodes into one kernel, which writes only its outputs:
//   the forward's pointwise intermediates (RMSNorm's fp32 upcast, pow and x * rsqrt; RoPE's products and
//   rotate_half; silu) never exist as tensors.
//
// For a dense Llama-family layer (a 16-bit model, or fp32 weights under autocast) this saves: the layer's input
// (in the residual stream's dtype), the first norm's rsqrt and output (one cast under autocast); q and k rotated
// and v (SDPA's inputs), SDPA's output and log-sum-exp; the residual sum the second norm reads, its rsqrt and
// output; gate's and up's outputs and their product (silu recomputed from gate for SwiGLU's backward); under
// autocast the weights' casts.
//
// What is compiled (run_config's compile_scope): the whole model with its loss (the Trainer's torch_compile), each
// decoder layer apart (accelerate's regional compilation, accelerate/utils/other.py compile_regions: the blocks of
// every nn.ModuleList), or each layer and the loss apart (torchtune's training.compile_model and compile_loss,
// torchtune/training/_compile.py). A layer is the same graph, so the same rows, in all three; the head and the loss
// differ (hf_head_ops.cpp: an eager loss as without compile, or the loss compiled after torchtune's eager fp32
// upcast of the logits, or fused into the compiled model). The final norm and the head's GEMM stay eager rows in
// all three.
// Internal to planner/profiles/hf/.
#include <string>
#include <string_view>

#include "planner/model/model_spec.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"
#include "planner/run/stack_traits.hpp"

namespace trainplan {

// Throws input_error naming --compile for a run whose compiled layers are not modelled: layers the rows do not write
// op by op for a compiled graph (GPT-2, experts, latent attention, fused projections, fp32 weights without autocast,
// adapters, eager attention, SDPA with a mask). Which stacks offer which scopes is their registration's
// (stack_profile::compile_scopes).
void check_hf_compile(std::string_view stack, const model_spec& m, const run_config& run, const precision_layout& layout);

// The report's line on the compile assumption; empty without --compile.
std::string hf_compile_line(const run_config& run, const stack_traits& traits);

}  // namespace trainplan
