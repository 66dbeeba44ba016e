#pragma once
// The hf profile's rows (planner/profiles/hf/activations_hf_rows.hpp): what no one operation makes (autocast's weight copies lumped, the forward's and backward's working
// sets where they are not written op by op) and a Mixture-of-Experts layer's rows.
#include "planner/profiles/hf/activations_hf_row_rules.hpp"

namespace trainplan::hf_rows {

// What no one operation makes: autocast's weight copies lumped, and the working sets where the forward or
// backward is not written op by op.
constexpr hf_row layer_working_rows[] = {
    // Autocast's bf16 copies of the layer's GEMM weights (not parameters, so kept as activations are).
    {"layer{}.autocast.weights", shape_rule::matmul, dtype_role::compute, keep_class::autocast_cache,
     amp | trains_all | coarse_forward},
    // A frozen fp32 base under autocast (LoRA): autocast caches only casts of leaves that require grad
    // (aten/src/ATen/autocast_mode.cpp, cached_cast), so each GEMM casts its weight anew, and the GEMM's
    // backward keeps that copy to compute its input's gradient: not layer 0's q, k and v without
    // checkpointing, whose input needs none (LoRA on TinyLlama's inventory: q_proj's copy saved 21 times in 22 layers).
    {"layer{}.autocast.frozen_weights.qkv", shape_rule::w_qkv, dtype_role::compute, keep_class::frozen_cast,
     amp | peft | coarse_forward | input_grad},
    {"layer{}.autocast.frozen_weights", shape_rule::matmul_after_qkv, dtype_role::compute, keep_class::frozen_cast,
     amp | peft | coarse_forward},
    // Working sets (not measured by the inventories, which hold what outlives an op): the MLP's forward
    // temporaries, and in backward the residual gradient and the MLP's inner gradients.
    {"layer{}.fwd.mlp_temporaries", shape_rule::bsf, dtype_role::param, keep_class::forward_working, dense_mlp | coarse_forward},
    {"layer{}.fwd.mlp_temporaries", shape_rule::bsf, dtype_role::param, keep_class::forward_estimate, dense_mlp | fwd_program},
    // (Where the backward is op by op, planner/profiles/hf/activations_hf_backward.hpp, these count for the peak timeline alone.)
    {"layer{}.bwd.d_residual", shape_rule::bsh, dtype_role::param, keep_class::backward_working, 0 | unless{bwd_program}},
    {"layer{}.bwd.d_mlp", shape_rule::bsf, dtype_role::param, keep_class::backward_working, dense_mlp | unless{bwd_program}},
    {"layer{}.bwd.d_mlp_compute", shape_rule::bsf, dtype_role::compute, keep_class::backward_working,
     dense_mlp | separate_proj | unless{bwd_program}},
    {"layer{}.bwd.d_residual", shape_rule::bsh, dtype_role::param, keep_class::backward_estimate, bwd_program},
    {"layer{}.bwd.d_mlp", shape_rule::bsf, dtype_role::param, keep_class::backward_estimate, bwd_program},
    {"layer{}.bwd.d_mlp_compute", shape_rule::bsf, dtype_role::compute, keep_class::backward_estimate, bwd_program},
    // Phi-3: chunk's backward writes gate_up_proj's whole [b, s, 2f] output gradient.
    {"layer{}.bwd.d_mlp_compute", shape_rule::bs2f, dtype_role::compute, keep_class::backward_working, dense_mlp | fused_proj},
};

// A Mixture-of-Experts layer's rows, apart so that dense layers (most configurations of a sweep) do not
// walk them.
constexpr hf_row moe_rows[] = {
    // Mixture of Experts (transformers' MixtralSparseMoeBlock, Qwen2Moe/Qwen3MoeSparseMoeBlock): the router's
    // softmax(dtype=float32) saves its output; topk its indices; the renormalising division its fp32
    // operands. Each expert reads its tokens gathered by index (the indices saved), its fused gate_up GEMM
    // output is kept whole (silu reads a view of it), silu's output and the product the down GEMM reads are
    // saved, and so is the down output, which the routing weight multiplies. Summed over the experts, every
    // token appears k times: R = k*T rows (the loop is dropless; no capacity).
    {"layer{}.moe.router_probs", shape_rule::te, dtype_role::fp32, keep_class::saved, moe},
    {"layer{}.moe.topk_indices", shape_rule::tk, dtype_role::index, keep_class::saved, moe},
    {"layer{}.moe.topk_weights", shape_rule::tk, dtype_role::fp32, keep_class::saved, moe},
    {"layer{}.moe.token_index", shape_rule::r_1, dtype_role::index, keep_class::saved, moe},
    {"layer{}.moe.expert_in", shape_rule::r_h, dtype_role::compute, keep_class::saved, moe | trains_mlp},
    {"layer{}.moe.gate_up", shape_rule::r_2f, dtype_role::compute, keep_class::saved, moe},
    {"layer{}.moe.silu", shape_rule::r_f, dtype_role::compute, keep_class::saved, moe},
    {"layer{}.moe.down_in", shape_rule::r_f, dtype_role::compute, keep_class::saved, moe | trains_mlp},
    {"layer{}.moe.expert_out", shape_rule::r_h, dtype_role::compute, keep_class::saved, moe},
    // Qwen2-MoE's shared expert: a dense SwiGLU over every token, scaled by sigmoid(shared_expert_gate(x)).
    {"layer{}.moe.shared.gate", shape_rule::bs_fs, dtype_role::compute, keep_class::saved, shared_expert},
    {"layer{}.moe.shared.silu", shape_rule::bs_fs, dtype_role::compute, keep_class::saved, shared_expert},
    {"layer{}.moe.shared.up", shape_rule::bs_fs, dtype_role::compute, keep_class::saved, shared_expert},
    {"layer{}.moe.shared.down_in", shape_rule::bs_fs, dtype_role::compute, keep_class::saved, shared_expert | trains_mlp},
    {"layer{}.moe.shared.out", shape_rule::bsh, dtype_role::compute, keep_class::saved, shared_expert | shared_gate},
    {"layer{}.moe.shared.gate_sigmoid", shape_rule::bs_1, dtype_role::compute, keep_class::saved, shared_expert | shared_gate},
    // The same for the experts' rows, with the one-hot mask the expert loop walks (not saved).
    {"layer{}.fwd.expert_mask", shape_rule::ekt, dtype_role::index, keep_class::forward_working, moe},
    {"layer{}.fwd.moe_temporaries", shape_rule::r_h, dtype_role::param, keep_class::forward_working, moe},
    {"layer{}.bwd.d_expert", shape_rule::r_f, dtype_role::param, keep_class::backward_working, moe},
    {"layer{}.bwd.d_expert_compute", shape_rule::r_2f, dtype_role::compute, keep_class::backward_working, moe},
};

}  // namespace trainplan::hf_rows
