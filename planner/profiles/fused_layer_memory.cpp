#include "planner/profiles/fused_layer_memory.hpp"

#include <algorithm>

#include "planner/run/moe.hpp"
#include "planner/util/checked_math.hpp"

namespace trainplan {

void add_fused_activations(inventory_builder& inv, const model_spec& m, const run_config& run, const precision_layout& layout,
                           const param_counts& pc, const pipeline_stage& stage, std::uint64_t V_rows, fused_loss loss) {
  const std::uint64_t b = run.micro_batch, s = run.seq, h = m.hidden, a = m.heads, f = m.ffn;
  const std::uint64_t qkv = m.qkv_width(), hq = m.out_width();  // hq: the attention output's width
  const dtype act = layout.activations;
  const dtype gemm_in = layout.gemm_input_saved.value_or(act);  // fp8 saves GEMM inputs in fp8
  const bool dropout = run.dropout > 0.0;
  const bool eager = run.attention == attention_kind::eager;
  const bool keep_layer = run.recompute != recompute_mode::full;
  const bool keep_core = run.recompute == recompute_mode::none;  // the attention core (s^2 buffers)
  const std::uint64_t tp = run.tp;
  auto share = [](std::uint64_t n, std::uint64_t parts) { return (n + parts - 1) / parts; };
  // Weights this GPU computes with, out of `elements` that hold `experts` routed-expert weights (split by tp).
  auto local_weights = [&](std::uint64_t elements, std::uint64_t experts) { return elements - experts + experts / run.ep; };
  const std::uint64_t layer_experts = share(pc.routed_experts_per_layer, tp);
  inv.set_inflight(stage.inflight);

  // Tensor parallelism (Korthikanti et al. 2022, Table 2): the attention heads, the MLP width and the
  // vocabulary split across tp GPUs; the layer's other tensors (norm inputs and outputs, dropout masks:
  // the "10sbh") stay whole, unless sequence parallelism splits them along the sequence.
  const std::uint64_t a_tp = share(a, tp), qkv_tp = share(qkv, tp), hq_tp = share(hq, tp), f_tp = share(f, tp),
                      V_tp = share(V_rows, tp), s_rep = run.sequence_parallel ? share(s, tp) : s;

  // ---- embedding -----------------------------------------------------------------------------------
  // The embedding's input and dropout mask, kept to its backward: one per micro-batch in flight on the first GPU.
  const std::uint64_t b_embed = checked_mul(b, stage.embedding_inflight, "activations in flight");
  if (stage.first)
    inv.span("batch.tokens", {b_embed, s}, dtype::i32, tensor_category::activations, event_kind::fwd_embed, event_kind::bwd_embed);
  if (stage.last)
    inv.span("batch.targets", {b, s}, dtype::i32, tensor_category::activations, event_kind::fwd_embed, event_kind::loss);
  if (dropout && stage.first)  // dropout on the embedding sum; its backward needs the mask
    inv.span("embed.dropout_mask", {b_embed, s, h}, dtype::u8, tensor_category::activations, event_kind::fwd_embed,
             event_kind::bwd_embed);

  // ---- one transformer layer (Korthikanti et al. 2022, Sec. 4.1, per-layer accounting) --------------
  // Residual stream entering the layer = input of the first norm; written by the previous layer.
  inv.layer("layer{}.ln1.in", {b, s_rep, h}, act, true, /*is_layer_input=*/true);  // 2sbh
  inv.layer("layer{}.attn.qkv_in", {b, s_rep, h}, gemm_in, keep_layer);           // 2sbh: norm output, QKV GEMM input
  if (m.is_mla()) {
    // Multi-head latent attention (Megatron-Core MLASelfAttention): the down projections' outputs, which
    // their RMSNorms save (the kv one with the RoPE key beside the latent), and the normed latents the up
    // projections read. The latents are not split by tp (each rank computes them whole).
    if (m.q_lora_rank > 0) {
      inv.layer("layer{}.attn.q_a", {b, s, m.q_lora_rank}, act, keep_layer);
      inv.layer("layer{}.attn.q_b_in", {b, s, m.q_lora_rank}, gemm_in, keep_layer);
    }
    inv.layer("layer{}.attn.kv_a", {b, s, m.kv_lora_rank + m.rope_head_dim}, act, keep_layer);
    inv.layer("layer{}.attn.kv_b_in", {b, s, m.kv_lora_rank}, gemm_in, keep_layer);
  }
  inv.layer("layer{}.attn.qkv", {b, s, qkv_tp}, act, keep_layer);                // 6sbh for MHA: Q, K (QK^T) and V
  if (eager) {
    inv.layer("layer{}.attn.softmax", {b, a_tp, s, s}, act, keep_layer && keep_core);  // 2as^2b
    if (dropout) {
      inv.layer("layer{}.attn.softmax_dropout_mask", {b, a_tp, s, s}, dtype::u8, keep_layer && keep_core);  // as^2b
      inv.layer("layer{}.attn.softmax_dropout", {b, a_tp, s, s}, act, keep_layer && keep_core);             // 2as^2b
    }
  } else {
    // Flash attention saves the fp32 log-sum-exp of each row (Dao et al. 2022, Alg. 2) and regenerates
    // its dropout mask from the RNG state, so nothing of size s^2 is kept.
    inv.layer("layer{}.attn.lse", {b, a_tp, s}, dtype::fp32, keep_layer);
  }
  inv.layer("layer{}.attn.out_in", {b, s, hq_tp}, gemm_in, keep_layer);  // 2sbh: attention output, out-proj input
  if (dropout) inv.layer("layer{}.attn.dropout_mask", {b, s_rep, h}, dtype::u8, keep_layer);  // sbh
  inv.layer("layer{}.ln2.in", {b, s_rep, h}, act, keep_layer);                                // 2sbh
  inv.layer("layer{}.mlp.fc_in", {b, s_rep, h}, gemm_in, keep_layer);                         // 2sbh
  if (m.family == model_family::gpt) {
    inv.layer("layer{}.mlp.gelu_in", {b, s, f_tp}, act, keep_layer);      // 8sbh at f = 4h
    inv.layer("layer{}.mlp.proj_in", {b, s, f_tp}, gemm_in, keep_layer);  // 8sbh: GELU output
  } else if (!m.is_moe() || m.dense_layers > 0) {
    // DeepSeek-V3's dense first layers hold a dense MLP of their own width; the MoE layers after them, below.
    if (m.is_moe()) inv.set_layer_range(0, m.dense_layers);
    const std::uint64_t fd_tp = share(m.dense_mlp_width(), tp);
    inv.layer("layer{}.mlp.gate", {b, s, fd_tp}, act, keep_layer);         // SwiGLU backward needs gate and up
    inv.layer("layer{}.mlp.up", {b, s, fd_tp}, act, keep_layer);
    inv.layer("layer{}.mlp.down_in", {b, s, fd_tp}, gemm_in, keep_layer);  // silu(gate) * up
  }
  if (m.is_moe()) {
    inv.set_layer_range(m.dense_layers, m.layers);
    // Mixture of Experts (Megatron-Core MoELayer with the all-to-all dispatcher): the router's fp32
    // probabilities (softmax's backward needs them) and the top-k choice and weights; the tokens permuted
    // to their experts (the experts' GEMM input); each expert's SwiGLU intermediates for the rows it gets;
    // and the expert outputs, which the combine's backward multiplies into the gradient of the weights.
    // Rows: planner/run/moe.hpp (k x b x s dropless, padded to the capacity otherwise).
    const std::uint64_t T = checked_mul(b, s, "tokens"), R = routed_rows(m, run), k = m.experts_per_token;
    inv.layer("layer{}.moe.router_probs", {T, m.experts}, dtype::fp32, keep_layer);
    inv.layer("layer{}.moe.topk_indices", {T, k}, dtype::i64, keep_layer);
    inv.layer("layer{}.moe.topk_weights", {T, k}, dtype::fp32, keep_layer);
    inv.layer("layer{}.moe.permuted_in", {R, h}, gemm_in, keep_layer);
    inv.layer("layer{}.mlp.gate", {R, f_tp}, act, keep_layer);
    inv.layer("layer{}.mlp.up", {R, f_tp}, act, keep_layer);
    inv.layer("layer{}.mlp.down_in", {R, f_tp}, gemm_in, keep_layer);
    inv.layer("layer{}.moe.expert_out", {R, h}, act, keep_layer);
    if (run.ep > 1) {
      // All-to-all (Megatron-Core MoEAlltoAllTokenDispatcher): the permuted rows go to the GPUs that hold
      // their experts and the expert outputs come back, a send and a receive buffer of R rows each, in the
      // layer's forward and again in its backward (balanced routing: each GPU receives as many as it sends).
      const std::int64_t fwd0 = inv.fwd_layer0(), bwd0 = inv.bwd_layer0();
      inv.layer_intervals("layer{}.moe.all_to_all", {2, R, h}, act, tensor_category::activations,
                          {{fwd0, 1, fwd0, 1}, {bwd0, -1, bwd0, -1}});
    }
    if (m.shared_expert_ffn > 0) {  // Qwen2-MoE's and DeepSeek's shared experts: a dense SwiGLU over every token
      const std::uint64_t fs_tp = share(m.shared_expert_ffn, tp);
      inv.layer("layer{}.moe.shared.gate", {b, s, fs_tp}, act, keep_layer);
      inv.layer("layer{}.moe.shared.up", {b, s, fs_tp}, act, keep_layer);
      inv.layer("layer{}.moe.shared.down_in", {b, s, fs_tp}, gemm_in, keep_layer);
    }
    inv.all_layers();
  }
  if (dropout) inv.layer("layer{}.mlp.dropout_mask", {b, s_rep, h}, dtype::u8, keep_layer);  // sbh
  if (layout.autocast_weight_cache) {
    // Each layer's GEMM weights, cast: a dense layer's, or an MoE layer's with its local experts
    // (DeepSeek's dense first layers and its MoE layers differ).
    auto cache = [&](std::uint64_t first, std::uint64_t end, std::uint64_t elements) {
      inv.set_layer_range(first, end);
      inv.layer("layer{}.autocast.weights", {elements}, dtype::bf16, keep_layer, false, tensor_category::weights).role =
          tensor_role::frozen_weights;
    };
    if (!m.is_moe()) cache(0, m.layers, share(pc.matmul_per_layer, tp));
    if (m.dense_layers > 0) cache(0, m.dense_layers, share(pc.matmul_per_dense_layer, tp));
    if (m.is_moe()) cache(m.dense_layers, m.layers, local_weights(share(pc.matmul_per_layer, tp), layer_experts));
    inv.all_layers();
  }

  // ---- head and loss -------------------------------------------------------------------------------
  const std::int64_t last_layer = static_cast<std::int64_t>(m.layers) - 1;
  if (!stage.last) {
    // A stage before the last sends its output on and frees it (Megatron deallocates the output tensor).
    inv.span("pipeline.output", {b, s_rep, h}, act, tensor_category::activations, event_kind::fwd_layer,
             event_kind::fwd_head, last_layer);
  } else {
  inv.span("final_norm.in", {b, s, h}, act, tensor_category::activations, event_kind::fwd_layer, event_kind::bwd_head,
           last_layer);
  inv.span("lm_head.in", {b, s, h}, gemm_in, tensor_category::activations, event_kind::fwd_head, event_kind::bwd_head);
  if (layout.autocast_weight_cache)
    inv.span("lm_head.autocast.weight", {V_tp, h}, dtype::bf16, tensor_category::weights, event_kind::fwd_head,
             event_kind::bwd_head)
        .role = tensor_role::frozen_weights;
  if (loss == fused_loss::fused_classifier) {
    // llm.c's fused classifier: softmax and cross-entropy in fp32 registers, the logits' gradient written over
    // the logits, which live on into the head's backward. V_rows wide (llm.c's padded vocabulary); the padded
    // columns get zero gradient and never enter the loss.
    inv.span("logits", {b, s, V_tp}, act, tensor_category::logits, event_kind::fwd_head, event_kind::bwd_head);
  } else {
    inv.span("logits", {b, s, V_tp}, act, tensor_category::logits, event_kind::fwd_head, event_kind::loss);
    // Megatron's loss runs on an fp32 copy of the logits (vocab_parallel_cross_entropy upcasts them).
    if (act != dtype::fp32)
      inv.span("logits.fp32", {b, s, V_tp}, dtype::fp32, tensor_category::logits, event_kind::loss, event_kind::loss);
    inv.span("logits.grad", {b, s, V_tp}, act, tensor_category::logits, event_kind::loss, event_kind::bwd_head);
  }
  }

  // ---- activation gradients (reused across layers, as llm.c does) -----------------------------------
  auto bwd_buffer = [&](std::string_view name, tensor_shape shape) {
    inv.span(name, shape, act, tensor_category::activation_grads, event_kind::bwd_head, event_kind::bwd_embed);
  };
  bwd_buffer("bwd.d_residual", {b, s, h});  // gradient flowing down the residual stream
  bwd_buffer("bwd.d_hidden", {b, s, h});    // gradient of a sub-block's input or output
  bwd_buffer("bwd.d_qkv", {b, s, qkv_tp});
  if (m.is_mla())  // the latents' gradients, on their way back through the up and down projections
    bwd_buffer("bwd.d_latent", {b, s, m.q_lora_rank + m.kv_lora_rank + m.rope_head_dim});
  // d_ffn holds the MLP's inner gradients (gate and up for SwiGLU), and, once the MLP is done, the
  // gradient of the attention output: it is as wide as the larger of the two.
  const std::uint64_t ffn_grad_width = m.family == model_family::llama ? checked_mul(2, f, "d_ffn") : f;
  if (!m.is_moe()) {
    bwd_buffer("bwd.d_ffn", {b, s, std::max(share(ffn_grad_width, tp), hq_tp)});
  } else {  // the experts' rows instead of the tokens (and the shared expert's, when wider)
    const std::uint64_t experts_grad = checked_mul(routed_rows(m, run), share(ffn_grad_width, tp), "d_ffn");
    // Over the tokens: the shared expert's, a dense first layer's (DeepSeek) or the attention output's.
    const std::uint64_t token_width = std::max({share(2 * m.shared_expert_ffn, tp), hq_tp,
                                                m.dense_layers > 0 ? share(2 * m.dense_mlp_width(), tp) : 0});
    const std::uint64_t tokens_grad = checked_product({b, s, token_width}, "d_ffn");
    bwd_buffer("bwd.d_ffn", {std::max(experts_grad, tokens_grad)});
    // The experts' rows' gradient, (R, h): of the expert outputs (the combine's backward) until the down
    // GEMMs' backward reads it, then of the permuted inputs (the gate/up GEMMs' backward, while d_ffn
    // still holds d_gate and d_up) until the permutation's backward adds it to the tokens. Megatron's
    // autograd allocates these two in turn; the harness reuses one buffer for every layer.
    bwd_buffer("bwd.d_expert_rows", {routed_rows(m, run), h});
  }
  if (eager) bwd_buffer("bwd.d_scores", {b, a_tp, s, s});
  else inv.span("bwd.flash_delta", {b, a_tp, s}, dtype::fp32, tensor_category::activation_grads, event_kind::bwd_head,
                event_kind::bwd_embed);  // rowsum(dO * O), FlashAttention-2 backward
}

}  // namespace trainplan
