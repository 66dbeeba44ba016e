#pragma once
// torchtitan's per-op selective activation checkpointing (activation_checkpoint mode "selective",
// selective_ac_option "op": torchtitan/distributed/activation_checkpoint.py, SelectiveAC and its policy; in
// December 2024 torchtitan/parallelisms/parallelize_llama.py, _apply_ac_to_transformer_block and
// _custom_policy). Each decoder layer runs under torch.utils.checkpoint with the contexts
// create_selective_checkpoint_contexts makes from a policy (torch/utils/checkpoint.py): in the forward the
// outputs of the ops the policy saves are kept (detached, in the checkpoint's storage), everything autograd
// would save is dropped; in the layer's backward the forward runs again, the saved ops returning their kept
// outputs instead of running. The policy saves the outputs of aten.mm, of SDPA's kernels and of a few
// collectives, except every second aten.mm: a counter per layer call, incremented at each mm, recomputes the
// even ones.
#include <array>
#include <cstdint>
#include <string_view>

#include "planner/model/model_spec.hpp"

namespace trainplan {

// The policy's decision for the `call`-th aten.mm (1-based) of one layer call: saved when odd
// (`meta[mm_count_key] % 2 == 0` recomputes).
constexpr bool op_policy_saves_matmul(std::uint64_t call) { return call % 2 == 1; }

// One matmul of a dense decoder layer: y[T, out] = x[T, in] W.
struct layer_matmul {
  std::string_view name;
  std::uint64_t in = 0, out = 0;
};

// A dense decoder layer's matmuls with separate projections, in the order its forward calls them (transformers'
// LlamaAttention: q_proj, k_proj, v_proj, o_proj; LlamaMLP, down_proj(act_fn(gate_proj(x)) * up_proj(x)), whose
// gate_proj Python evaluates before up_proj; torchtitan's Attention wq, wk, wv, wo and FeedForward
// w2(silu(w1(x)) * w3(x)) in the same order).
std::array<layer_matmul, 7> dense_layer_matmuls(const model_spec& m);

// The weight elements, per layer, of the matmuls the policy recomputes (the even calls: k_proj, o_proj and
// up_proj): their recomputation costs 2 x tokens x this FLOPs.
std::uint64_t op_policy_recomputed_matmul_weights(const model_spec& m);

}  // namespace trainplan
