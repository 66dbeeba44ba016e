#pragma once
// The hf profile's backward op by op: GPT-2 fully fine-tuned on SDPA's fused kernel, under autocast or in a 16-bit
// model, with or without dropout and checkpointing. The rows name the backward's temporaries (the vocabulary of
// planner/profiles/hf/activations_hf_row_rules.hpp); the steps say in which order the autograd engine makes and
// frees them and releases what the forward saved (planner/memory/inventory.hpp, backward_step), each under the
// condition it needs (a dropout's backward only where there is dropout). The order is the autograd engine's, as
// the recorded allocator histories show it (GPT-2 under autocast with dropout, checkpointed and not; a bf16 GPT-2
// without dropout: data/measurements/allocator-history-*); what they do not show is derived from the same rules
// below (dropout 0: F.dropout returns its input, no node, no mask; a 16-bit model's dropout as autocast's less the
// casts). The allocator replay follows the steps; the peak timeline counts the coarse backward_estimate rows
// instead. Data only; included by activations_hf.cpp alone.
//
// What the histories show, and why (PyTorch's tools/autograd/derivatives.yaml, torch/csrc/autograd):
//   - Autocast's casts have backwards of their own (ToCopyBackward0): a bf16 GEMM's input gradient becomes an
//     fp32 tensor where the forward cast fp32 to bf16, and a weight's bf16 gradient becomes the fp32 .grad
//     (AccumulateGrad steals it), after which the bf16 one is freed.
//   - Where an fp32 tensor meets a bf16 one (the residual add, gelu_new's products and sums), the bf16
//     operand's gradient is a cast copy of the fp32 gradient.
//   - A node frees what it saved once it has run; a gradient is freed once its last consumer has run. Three
//     gradients flow into gelu_new's input x: the engine's input buffer keeps the first and adds the others into
//     it in place (input_buffer.cpp, accumulate), each freed once added. Each residual gradient (the LayerNorm
//     backwards') is added so into the one gradient of the residual stream, which lives from the final norm's
//     backward to the embedding's.
//   - Non-reentrant checkpointing rebuilds a layer when its backward first needs a saved tensor: after
//     the residual add's backward, which saves nothing and casts the gradient for the MLP branch first (under
//     autocast); in a 16-bit model at once (resid_dropout's backward needs its mask, c_proj's its input).
//   - Dropout 0: F.dropout returns its input unchanged (aten/src/ATen/native/Dropout.cpp, dropout: p == 0), so
//     no node saves a mask and the branch's gradient reaches c_proj as it is, freed where the dropout's
//     gradient would have been.
//   - Conv1D's addmm: its bias gradient's column sum makes a staging buffer of 8 bytes per element of the
//     [b*s, n] gradient, freed at once (24, 96 and 72 MiB for GPT-2 small's [4096, n] gradients of
//     n = 768, 3072, 2304; 32, 128 and 96 MiB for GPT-2 medium's history).
//   - SDPA's fused backward (cuDNN on the H100) writes dq, dk, dv as three tensors and takes one workspace of
//     b*a*s*(d + 1) fp32 (12.19 MiB in GPT-2's history, 16.25 MiB in GPT-2 medium's), freed when it returns; then
//     split's backward concatenates the three into c_attn's output gradient.
#include "planner/profiles/hf/activations_hf_row_rules.hpp"
#include "planner/memory/inventory.hpp"

namespace trainplan::hf_rows {

// One GPT-2 layer's backward temporaries, in the order its backward makes them (those only autocast's casts
// make: amp). In a 16-bit model the gradients are in the model's dtype and no cast copies them.
constexpr hf_row gpt_backward_rows[] = {
    // The residual add's backward: the gradient for the bf16 MLP branch (resid_dropout's output).
    {"layer{}.bwd.d_mlp_branch", shape_rule::bsh, dtype_role::compute, keep_class::backward_moment, bwd_program | amp},
    {"layer{}.bwd.d_mlp_proj_out", shape_rule::bsh, dtype_role::compute, keep_class::backward_moment, bwd_program | dropout},
    // mlp.c_proj: the input's and the weight's bf16 gradients, the bias sum's staging buffer.
    {"layer{}.bwd.d_proj_in", shape_rule::bsf, dtype_role::compute, keep_class::backward_moment, bwd_program},
    {"layer{}.bwd.d_proj_weight", shape_rule::w_proj, dtype_role::compute, keep_class::backward_moment, bwd_program | amp},
    {"layer{}.bwd.proj_bias_sum", shape_rule::reduce_bsh, dtype_role::fp32, keep_class::backward_moment, bwd_program},
    // gelu_new, 0.5*x * (1 + tanh(sqrt(2/pi)*(x + 0.044715*pow(x, 3)))), backwards: its output's fp32
    // gradient (the cast's backward), each product's and function's gradient in fp32, and x's three
    // contributions cast to bf16.
    {"layer{}.bwd.d_gelu_out", shape_rule::bsf, dtype_role::param, keep_class::backward_moment, bwd_program | amp},
    {"layer{}.bwd.d_one_plus_tanh", shape_rule::bsf, dtype_role::param, keep_class::backward_moment, bwd_program},
    {"layer{}.bwd.d_half_x_fp32", shape_rule::bsf, dtype_role::param, keep_class::backward_moment, bwd_program | amp},
    {"layer{}.bwd.d_half_x", shape_rule::bsf, dtype_role::compute, keep_class::backward_moment, bwd_program},
    {"layer{}.bwd.d_inner_scaled", shape_rule::bsf, dtype_role::param, keep_class::backward_moment, bwd_program},
    {"layer{}.bwd.d_inner", shape_rule::bsf, dtype_role::param, keep_class::backward_moment, bwd_program},
    {"layer{}.bwd.d_fc_out", shape_rule::bsf, dtype_role::compute, keep_class::backward_moment, bwd_program | amp},
    {"layer{}.bwd.d_cube_scaled", shape_rule::bsf, dtype_role::param, keep_class::backward_moment, bwd_program},
    // pow's backward, grad * 3 * x^2: x^2, its product with 3, the product with the gradient.
    {"layer{}.bwd.pow_square", shape_rule::bsf, dtype_role::param, keep_class::backward_moment, bwd_program},
    {"layer{}.bwd.pow_scaled", shape_rule::bsf, dtype_role::param, keep_class::backward_moment, bwd_program},
    {"layer{}.bwd.d_pow_in", shape_rule::bsf, dtype_role::param, keep_class::backward_moment, bwd_program},
    {"layer{}.bwd.d_fc_out_pow", shape_rule::bsf, dtype_role::compute, keep_class::backward_moment, bwd_program | amp},
    {"layer{}.bwd.d_fc_out_half", shape_rule::bsf, dtype_role::compute, keep_class::backward_moment, bwd_program},
    // mlp.c_fc, ln_2.
    {"layer{}.bwd.d_fc_in", shape_rule::bsh, dtype_role::compute, keep_class::backward_moment, bwd_program},
    {"layer{}.bwd.d_fc_weight", shape_rule::w_fc, dtype_role::compute, keep_class::backward_moment, bwd_program | amp},
    {"layer{}.bwd.fc_bias_sum", shape_rule::reduce_bsf, dtype_role::fp32, keep_class::backward_moment, bwd_program},
    {"layer{}.bwd.d_ln2_out", shape_rule::bsh, dtype_role::param, keep_class::backward_moment, bwd_program | amp},
    {"layer{}.bwd.d_ln2_in", shape_rule::bsh, dtype_role::param, keep_class::backward_moment, bwd_program},
    // The attention: the residual add's cast for its branch, resid_dropout, attn.c_proj, SDPA, c_attn, ln_1.
    {"layer{}.bwd.d_attn_branch", shape_rule::bsh, dtype_role::compute, keep_class::backward_moment, bwd_program | amp},
    {"layer{}.bwd.d_attn_proj_out", shape_rule::bsh, dtype_role::compute, keep_class::backward_moment, bwd_program | dropout},
    {"layer{}.bwd.d_o_in", shape_rule::bsh, dtype_role::compute, keep_class::backward_moment, bwd_program},
    {"layer{}.bwd.d_o_weight", shape_rule::w_o, dtype_role::compute, keep_class::backward_moment, bwd_program | amp},
    {"layer{}.bwd.o_bias_sum", shape_rule::reduce_bsh, dtype_role::fp32, keep_class::backward_moment, bwd_program},
    {"layer{}.bwd.d_q", shape_rule::bs_q, dtype_role::compute, keep_class::backward_moment, bwd_program},
    {"layer{}.bwd.d_k", shape_rule::bs_q, dtype_role::compute, keep_class::backward_moment, bwd_program},
    {"layer{}.bwd.d_v", shape_rule::bs_q, dtype_role::compute, keep_class::backward_moment, bwd_program},
    {"layer{}.bwd.sdpa_workspace", shape_rule::sdpa_bwd, dtype_role::fp32, keep_class::backward_moment, bwd_program},
    {"layer{}.bwd.d_qkv", shape_rule::bs_qkv, dtype_role::compute, keep_class::backward_moment, bwd_program},
    {"layer{}.bwd.d_qkv_in", shape_rule::bsh, dtype_role::compute, keep_class::backward_moment, bwd_program},
    {"layer{}.bwd.d_qkv_weight", shape_rule::w_qkv, dtype_role::compute, keep_class::backward_moment, bwd_program | amp},
    {"layer{}.bwd.qkv_bias_sum", shape_rule::reduce_bs_qkv, dtype_role::fp32, keep_class::backward_moment, bwd_program},
    {"layer{}.bwd.d_ln1_out", shape_rule::bsh, dtype_role::param, keep_class::backward_moment, bwd_program | amp},
    {"layer{}.bwd.d_ln1_in", shape_rule::bsh, dtype_role::param, keep_class::backward_moment, bwd_program},
};

using step = backward_step;
constexpr step::kind_t alloc = step::alloc, release = step::free;
// A step that applies only under `c` (the run's bits: activations_hf_row_rules.hpp).
constexpr step only(condition c, step s) {
  s.when_all = c.all;
  s.when_none = c.none;
  return s;
}

// One GPT-2 layer's backward under autocast (GPT-2 checkpointed under autocast; not checkpointed, without the recomputation). The layer's
// gradients (layer{}.grads) appear one parameter at a time, each where its cast's backward runs.
constexpr step gpt_layer_backward[] = {
    {alloc, "layer{}.bwd.d_mlp_branch"},
    {step::recompute},
    // resid_dropout, then c_proj: its saved weight copy and input go once it has run.
    only(dropout, {alloc, "layer{}.bwd.d_mlp_proj_out"}), only(dropout, {release, "layer{}.mlp.dropout_mask"}),
    only(dropout, {release, "layer{}.bwd.d_mlp_branch"}),
    {alloc, "layer{}.bwd.d_proj_in"}, {alloc, "layer{}.bwd.d_proj_weight"},
    {release, "layer{}.autocast.weights.proj"}, {release, "layer{}.mlp.proj_in"},
    {alloc, "layer{}.bwd.proj_bias_sum"}, {release, "layer{}.bwd.proj_bias_sum"},
    only(dropout, {release, "layer{}.bwd.d_mlp_proj_out"}), only(unless{dropout}, {release, "layer{}.bwd.d_mlp_branch"}),
    {alloc, "layer{}.grads", "layer{}.mlp.proj.bias"},
    {alloc, "layer{}.bwd.d_gelu_out"}, {release, "layer{}.bwd.d_proj_in"},
    {alloc, "layer{}.grads", "layer{}.mlp.proj.weight"}, {release, "layer{}.bwd.d_proj_weight"},
    // gelu_new, outermost product first.
    {alloc, "layer{}.bwd.d_one_plus_tanh"}, {alloc, "layer{}.bwd.d_half_x_fp32"},
    {release, "layer{}.mlp.gelu.half_x"}, {release, "layer{}.mlp.gelu.one_plus_tanh"},
    {alloc, "layer{}.bwd.d_half_x"}, {release, "layer{}.bwd.d_half_x_fp32"}, {release, "layer{}.bwd.d_gelu_out"},
    {alloc, "layer{}.bwd.d_inner_scaled"}, {release, "layer{}.mlp.gelu.tanh"}, {release, "layer{}.bwd.d_one_plus_tanh"},
    {alloc, "layer{}.bwd.d_inner"}, {release, "layer{}.bwd.d_inner_scaled"},
    {alloc, "layer{}.bwd.d_fc_out"}, {alloc, "layer{}.bwd.d_cube_scaled"}, {release, "layer{}.bwd.d_inner"},
    {alloc, "layer{}.bwd.pow_square"}, {alloc, "layer{}.bwd.pow_scaled"}, {alloc, "layer{}.bwd.d_pow_in"},
    {release, "layer{}.bwd.pow_scaled"}, {release, "layer{}.bwd.pow_square"}, {release, "layer{}.mlp.gelu.pow_in"},
    {release, "layer{}.bwd.d_cube_scaled"},
    // x's other two gradients, each added into the first (d_fc_out) and freed.
    {alloc, "layer{}.bwd.d_fc_out_pow"}, {release, "layer{}.bwd.d_pow_in"}, {release, "layer{}.bwd.d_fc_out_pow"},
    {alloc, "layer{}.bwd.d_fc_out_half"}, {release, "layer{}.bwd.d_half_x"}, {release, "layer{}.bwd.d_fc_out_half"},
    // c_fc, then ln_2, whose input gradient is added into the residual stream's.
    {alloc, "layer{}.bwd.d_fc_in"}, {alloc, "layer{}.bwd.d_fc_weight"},
    {release, "layer{}.autocast.weights.fc"}, {release, "layer{}.mlp.fc_in"},
    {alloc, "layer{}.bwd.fc_bias_sum"}, {release, "layer{}.bwd.fc_bias_sum"}, {release, "layer{}.bwd.d_fc_out"},
    {alloc, "layer{}.grads", "layer{}.mlp.fc.bias"},
    {alloc, "layer{}.bwd.d_ln2_out"}, {release, "layer{}.bwd.d_fc_in"},
    {alloc, "layer{}.grads", "layer{}.mlp.fc.weight"}, {release, "layer{}.bwd.d_fc_weight"},
    {alloc, "layer{}.bwd.d_ln2_in"}, {alloc, "layer{}.grads", "layer{}.ln2.weight"}, {alloc, "layer{}.grads", "layer{}.ln2.bias"},
    {release, "layer{}.ln2.stats"}, {release, "layer{}.ln2.in"}, {release, "layer{}.bwd.d_ln2_out"},
    {release, "layer{}.bwd.d_ln2_in"},
    // The attention's branch: resid_dropout, c_proj.
    {alloc, "layer{}.bwd.d_attn_branch"}, only(dropout, {alloc, "layer{}.bwd.d_attn_proj_out"}),
    only(dropout, {release, "layer{}.attn.dropout_mask"}), only(dropout, {release, "layer{}.bwd.d_attn_branch"}),
    {alloc, "layer{}.bwd.d_o_in"}, {alloc, "layer{}.bwd.d_o_weight"}, {release, "layer{}.autocast.weights.o"},
    {alloc, "layer{}.bwd.o_bias_sum"}, {release, "layer{}.bwd.o_bias_sum"},
    only(dropout, {release, "layer{}.bwd.d_attn_proj_out"}), only(unless{dropout}, {release, "layer{}.bwd.d_attn_branch"}),
    {alloc, "layer{}.grads", "layer{}.attn.out.bias"},
    {alloc, "layer{}.grads", "layer{}.attn.out.weight"}, {release, "layer{}.bwd.d_o_weight"},
    // SDPA (its output is also c_proj's saved input), then split's backward.
    {alloc, "layer{}.bwd.d_q"}, {alloc, "layer{}.bwd.d_k"}, {alloc, "layer{}.bwd.d_v"},
    {alloc, "layer{}.bwd.sdpa_workspace"}, {release, "layer{}.bwd.sdpa_workspace"},
    {release, "layer{}.attn.out_in"}, {release, "layer{}.attn.lse"}, {release, "layer{}.attn.qkv"},
    {release, "layer{}.bwd.d_o_in"},
    {alloc, "layer{}.bwd.d_qkv"}, {release, "layer{}.bwd.d_q"}, {release, "layer{}.bwd.d_k"}, {release, "layer{}.bwd.d_v"},
    // c_attn, then ln_1; the layer's input (its checkpoint, or ln_1's saved input) goes last.
    {alloc, "layer{}.bwd.d_qkv_in"}, {alloc, "layer{}.bwd.d_qkv_weight"},
    {release, "layer{}.autocast.weights.qkv"}, {release, "layer{}.attn.qkv_in"},
    {alloc, "layer{}.bwd.qkv_bias_sum"}, {release, "layer{}.bwd.qkv_bias_sum"}, {release, "layer{}.bwd.d_qkv"},
    {alloc, "layer{}.grads", "layer{}.attn.qkv.bias"},
    {alloc, "layer{}.bwd.d_ln1_out"}, {release, "layer{}.bwd.d_qkv_in"},
    {alloc, "layer{}.grads", "layer{}.attn.qkv.weight"}, {release, "layer{}.bwd.d_qkv_weight"},
    {alloc, "layer{}.bwd.d_ln1_in"}, {alloc, "layer{}.grads", "layer{}.ln1.weight"}, {alloc, "layer{}.grads", "layer{}.ln1.bias"},
    {release, "layer{}.ln1.stats"}, {release, "layer{}.bwd.d_ln1_out"}, {release, "layer{}.ln1.in"},
    {release, "layer{}.bwd.d_ln1_in"},
};

// The head's backward: nll_loss's gradient, log_softmax's, the cast back to bf16, lm_head's input and weight
// gradients (the tied table's fp32 .grad from the weight's), then ln_f's, which starts the residual stream's.
constexpr step gpt_head_backward[] = {
    {alloc, "loss.grad_log_probs"}, {release, "loss.shift_labels"},
    {alloc, "loss.grad_logits_fp32"}, {release, "loss.grad_log_probs"}, {release, "loss.log_probs"},
    {alloc, "head.d_logits"}, {release, "loss.grad_logits_fp32"},
    {alloc, "head.d_weight"}, {alloc, "head.d_input"}, {release, "head.d_logits"},
    {release, "lm_head.autocast.weight"}, {release, "lm_head.in"},
    {alloc, "head.d_input_fp32"}, {release, "head.d_input"},
    {alloc, "grads.head", "embed.tokens"}, {release, "head.d_weight"},
    {alloc, "grad.residual"}, {alloc, "grads.head", "final_norm.weight"}, {alloc, "grads.head", "final_norm.bias"},
    {release, "head.d_input_fp32"}, {release, "final_norm.in"}, {release, "final_norm.stats"},
};

// The embedding's backward: the dropout's, the position table's gradient (summed over the batch, then
// embedding_dense_backward's), the token table's (added into the head's contribution), with its sort
// path's partial sums (embed.grad_partials, where there is one).
constexpr step gpt_embedding_backward[] = {
    only(dropout, {alloc, "embed.d_dropout"}), only(dropout, {release, "grad.residual"}),
    only(dropout, {release, "embed.dropout_mask"}),
    {alloc, "embed.d_positions_sum"}, {alloc, "grads.head", "embed.positions"}, {release, "embed.d_positions_sum"},
    {alloc, "grads.embedding.incoming"},
    only(sorted_embedding_backward, {alloc, "embed.grad_partials"}), only(sorted_embedding_backward, {release, "embed.grad_partials"}),
    only(dropout, {release, "embed.d_dropout"}), only(unless{dropout}, {release, "grad.residual"}),
    {release, "grads.embedding.incoming"},
};

// A 16-bit GPT-2's layer backward (a bf16 GPT-2's history without dropout, not checkpointed): no casts, so the
// residual stream's gradient is c_proj's output gradient itself (or, with dropout, resid_dropout's backward of
// it), each GEMM writes its weight's .grad, and gelu_new's x gets its first gradient as the sum's own gradient
// (d_inner), into which the other two are added. Checkpointed, the layer is rebuilt at once: its first node
// (resid_dropout's, or c_proj's) needs a saved tensor.
constexpr step gpt_16bit_layer_backward[] = {
    {step::recompute},
    only(dropout, {alloc, "layer{}.bwd.d_mlp_proj_out"}), only(dropout, {release, "layer{}.mlp.dropout_mask"}),
    {alloc, "layer{}.bwd.d_proj_in"}, {alloc, "layer{}.grads", "layer{}.mlp.proj.weight"},
    {alloc, "layer{}.grads", "layer{}.mlp.proj.bias"}, {alloc, "layer{}.bwd.proj_bias_sum"},
    {release, "layer{}.bwd.proj_bias_sum"}, {release, "layer{}.mlp.proj_in"},
    only(dropout, {release, "layer{}.bwd.d_mlp_proj_out"}),
    {alloc, "layer{}.bwd.d_one_plus_tanh"}, {alloc, "layer{}.bwd.d_half_x"}, {release, "layer{}.bwd.d_proj_in"},
    {release, "layer{}.mlp.gelu.one_plus_tanh"}, {release, "layer{}.mlp.gelu.half_x"},
    {alloc, "layer{}.bwd.d_inner_scaled"}, {release, "layer{}.bwd.d_one_plus_tanh"}, {release, "layer{}.mlp.gelu.tanh"},
    {alloc, "layer{}.bwd.d_inner"}, {release, "layer{}.bwd.d_inner_scaled"},
    {alloc, "layer{}.bwd.d_cube_scaled"}, {alloc, "layer{}.bwd.pow_square"}, {alloc, "layer{}.bwd.pow_scaled"},
    {alloc, "layer{}.bwd.d_pow_in"}, {release, "layer{}.bwd.pow_scaled"}, {release, "layer{}.bwd.pow_square"},
    {release, "layer{}.bwd.d_cube_scaled"}, {release, "layer{}.mlp.gelu.pow_in"}, {release, "layer{}.bwd.d_pow_in"},
    {alloc, "layer{}.bwd.d_fc_out_half"}, {release, "layer{}.bwd.d_half_x"}, {release, "layer{}.bwd.d_fc_out_half"},
    {alloc, "layer{}.bwd.d_fc_in"}, {alloc, "layer{}.grads", "layer{}.mlp.fc.weight"},
    {alloc, "layer{}.grads", "layer{}.mlp.fc.bias"}, {alloc, "layer{}.bwd.fc_bias_sum"},
    {release, "layer{}.bwd.fc_bias_sum"}, {release, "layer{}.bwd.d_inner"}, {release, "layer{}.mlp.fc_in"},
    {alloc, "layer{}.bwd.d_ln2_in"}, {alloc, "layer{}.grads", "layer{}.ln2.weight"}, {alloc, "layer{}.grads", "layer{}.ln2.bias"},
    {release, "layer{}.bwd.d_fc_in"}, {release, "layer{}.ln2.in"}, {release, "layer{}.ln2.stats"},
    {release, "layer{}.bwd.d_ln2_in"},
    only(dropout, {alloc, "layer{}.bwd.d_attn_proj_out"}), only(dropout, {release, "layer{}.attn.dropout_mask"}),
    {alloc, "layer{}.bwd.d_o_in"}, {alloc, "layer{}.grads", "layer{}.attn.out.weight"},
    {alloc, "layer{}.grads", "layer{}.attn.out.bias"}, {alloc, "layer{}.bwd.o_bias_sum"}, {release, "layer{}.bwd.o_bias_sum"},
    only(dropout, {release, "layer{}.bwd.d_attn_proj_out"}),
    {alloc, "layer{}.bwd.d_q"}, {alloc, "layer{}.bwd.d_k"}, {alloc, "layer{}.bwd.d_v"},
    {alloc, "layer{}.bwd.sdpa_workspace"}, {release, "layer{}.bwd.sdpa_workspace"}, {release, "layer{}.bwd.d_o_in"},
    {release, "layer{}.attn.qkv"}, {release, "layer{}.attn.lse"}, {release, "layer{}.attn.out_in"},
    {alloc, "layer{}.bwd.d_qkv"}, {release, "layer{}.bwd.d_q"}, {release, "layer{}.bwd.d_k"}, {release, "layer{}.bwd.d_v"},
    {alloc, "layer{}.bwd.d_qkv_in"}, {alloc, "layer{}.grads", "layer{}.attn.qkv.weight"},
    {alloc, "layer{}.grads", "layer{}.attn.qkv.bias"}, {alloc, "layer{}.bwd.qkv_bias_sum"},
    {release, "layer{}.bwd.qkv_bias_sum"}, {release, "layer{}.bwd.d_qkv"}, {release, "layer{}.attn.qkv_in"},
    {alloc, "layer{}.bwd.d_ln1_in"}, {alloc, "layer{}.grads", "layer{}.ln1.weight"}, {alloc, "layer{}.grads", "layer{}.ln1.bias"},
    {release, "layer{}.bwd.d_qkv_in"}, {release, "layer{}.ln1.in"}, {release, "layer{}.ln1.stats"},
    {release, "layer{}.bwd.d_ln1_in"},
};

// Its head: the loss's fp32 gradients cast back to the logits' dtype, lm_head's weight gradient (the tied table's
// contribution, held until the embedding's joins it) and input gradient, then ln_f's.
constexpr step gpt_16bit_head_backward[] = {
    {alloc, "loss.grad_log_probs"}, {release, "loss.shift_labels"},
    {alloc, "loss.grad_logits_fp32"}, {release, "loss.grad_log_probs"}, {release, "loss.log_probs"},
    {alloc, "head.d_logits"}, {release, "loss.grad_logits_fp32"},
    {alloc, "head.d_weight"}, {alloc, "head.d_input"}, {release, "head.d_logits"}, {release, "lm_head.in"},
    {alloc, "grad.residual"}, {alloc, "grads.head", "final_norm.weight"}, {alloc, "grads.head", "final_norm.bias"},
    {release, "head.d_input"}, {release, "final_norm.in"}, {release, "final_norm.stats"},
};

// Its embedding: the dropout's backward (with dropout), the position table's gradient, the token table's, then
// their sum with the head's contribution, a new tensor (the engine adds out of place here), which becomes the
// table's .grad.
constexpr step gpt_16bit_embedding_backward[] = {
    only(dropout, {alloc, "embed.d_dropout"}), only(dropout, {release, "grad.residual"}),
    only(dropout, {release, "embed.dropout_mask"}),
    {alloc, "embed.d_positions_sum"}, {alloc, "grads.head", "embed.positions"}, {release, "embed.d_positions_sum"},
    {alloc, "grads.embedding.incoming"},
    only(sorted_embedding_backward, {alloc, "embed.grad_partials"}), only(sorted_embedding_backward, {release, "embed.grad_partials"}),
    only(dropout, {release, "embed.d_dropout"}), only(unless{dropout}, {release, "grad.residual"}),
    {alloc, "grads.head", "embed.tokens"}, {release, "head.d_weight"}, {release, "grads.embedding.incoming"},
};

}  // namespace trainplan::hf_rows
