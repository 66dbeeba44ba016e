#pragma once
// One micro-batch of a GPT or Llama transformer on the CPU kernels: forward layer by layer, loss, backward
// layer by layer, with the buffers the planner's inventory names, allocated and freed at the planner's
// events (planner/memory/inventory.hpp), and recomputation that really recomputes.
#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/moe_permute.hpp"
#include "planner/memory/inventory.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"
#include "validate/model_state.hpp"
#include "validate/tracking_allocator.hpp"

namespace trainplan::validate {

class transformer {
 public:
  // `buffers` is the planner's inventory of this run (the harness's profile's): every activation the harness
  // allocates is one of its buffers, with its shape and dtype.
  transformer(const model_spec& m, const run_config& run, const precision_layout& layout, const inventory& buffers,
              tracking_allocator& alloc, model_state& state, std::uint64_t seed);

  // Forward, loss and backward of micro-batch `micro_batch` of step `step` (both 0-based); gradients are
  // added to the model state's. The loss gradient is multiplied by loss_scale / (tokens * grad_accum).
  // Each token's loss is added on the device (loss.token_losses); nothing is read back.
  void run_micro_batch(int step, std::uint64_t micro_batch, float loss_scale);
  // The mean cross-entropy over the micro-batches run since the last call, read from the device once.
  double take_mean_loss();
  // Allocates the inventory's buffer `name` ("layer3.attn.qkv": the layer filled in) with its shape and
  // dtype; the training step allocates its own (the fp16 overflow flag) here too.
  tensor act(const std::string& name);

  // Tokens and targets for (step, micro-batch): generated from the seed unless set here ([b, s] each).
  std::optional<std::vector<std::int32_t>> fixed_tokens, fixed_targets;

 private:
  struct layer_buffers {
    tensor ln1_in, qkv_in, qkv, softmax, softmax_mask, softmax_dropped, lse, out_in, attn_mask, ln2_in, fc_in;
    tensor mlp_a, mlp_b, mlp_c;  // gpt: gelu_in, proj_in; llama: gate, up, down_in (MoE: over the experts' rows)
    tensor mlp_mask;
    tensor router_probs, topk_indices, topk_weights, permuted_in, expert_out;  // Mixture of Experts
  };
  struct backward_buffers {
    tensor d_residual, d_hidden, d_qkv, d_ffn, d_scores, flash_delta;
    tensor norm_partials;  // the norms' weight-gradient sums per thread block (kernels/norm.hpp)
    tensor d_expert_rows;  // Mixture of Experts
  };

  void mark(int step, std::uint64_t mb, const char* kind, std::uint64_t layer, const std::string& label);
  std::string pname(std::uint64_t layer, const char* suffix) const;
  std::uint64_t site(int step, std::uint64_t mb, std::uint64_t layer, int kind) const;

  void embed_forward(int step, std::uint64_t mb);
  // Computes whatever of layer i's buffers is missing. When `output` is given (the forward pass), also
  // writes the layer's output there; a recomputation in backward does not need it.
  void layer_forward(std::uint64_t i, int step, std::uint64_t mb, tensor* output);
  // The Mixture-of-Experts MLP (llama family): router, top-k, permutation, each expert's SwiGLU and the
  // combine into `output` (when given); its backward leaves the gradient of mlp.fc_in in bwd.d_hidden.
  void moe_forward(std::uint64_t i, tensor* output);
  void moe_backward(std::uint64_t i);
  kernels::moe_row_map moe_rows(const layer_buffers& l) const;  // from the layer's top-k indices
  void drop_unkept(layer_buffers& l);
  void head_forward_and_loss(int step, std::uint64_t mb, float loss_scale);
  void head_backward();
  void layer_backward(std::uint64_t i, int step, std::uint64_t mb);
  void embed_backward();

  const model_spec& m_;
  const run_config& run_;
  const precision_layout& layout_;
  const inventory& inv_;
  tracking_allocator& alloc_;
  const kernels::kernel_ops& ops_;  // where and how it computes: alloc_'s backend
  model_state& state_;
  std::uint64_t seed_;
  kernels::attention_shape shape_;
  std::uint64_t rows_;  // b * s
  // The rows of the vocabulary tables and the logits' width: V padded to a multiple of 128 as llm.c's
  // (planner/model/param_count.hpp vocab_rows); the first m_.vocab are the classes.
  std::uint64_t vocab_rows_;
  kernels::moe_dispatch dispatch_;  // tokens, experts, top-k, capacity (MoE only)

  tensor token_losses_;  // (b * s) fp32, summed over the micro-batches until take_mean_loss
  std::uint64_t micro_batches_in_losses_ = 0;
  tensor tokens_, targets_, embed_mask_, final_norm_in_, lm_head_in_;
  tensor logits_;  // (b, s, vocab_rows_); after the loss, their gradient (zero in the padded columns)
  std::vector<layer_buffers> layers_;
  backward_buffers bwd_;
};

}  // namespace trainplan::validate
