#include "planner/profiles/fused_layer.hpp"

#include <algorithm>

#include "planner/run/moe.hpp"
#include "planner/time/flops.hpp"
#include "planner/util/checked_math.hpp"

namespace trainplan {
namespace {

std::uint64_t share(std::uint64_t n, std::uint64_t parts) { return (n + parts - 1) / parts; }

}  // namespace

void walk_fused_step(const fused_step& step, const fused_memory* memory, step_rows* ops) {
  const model_spec& m = step.model;
  const run_config& run = step.run;
  const precision_layout& layout = step.layout;
  const fused_layer_options& options = step.options;
  inventory_builder* inv = memory ? &memory->inv : nullptr;
  const pipeline_stage stage = memory ? memory->stage : pipeline_stage{};

  // Shapes, for the buffers: b micro-batch, s sequence, h hidden, a heads, f the MLP's width. Tensor
  // parallelism (Korthikanti et al. 2022, Table 2) splits the attention heads, the MLP width and the vocabulary
  // across tp GPUs; the layer's other tensors (norm inputs and outputs, dropout masks: the "10sbh") stay whole,
  // unless sequence parallelism splits them along the sequence. Context parallelism gives each GPU seq / cp of
  // every sequence's tokens (Megatron-Core's get_batch_on_this_cp_rank) for every tensor, attention's queries
  // included; only attention's keys span the whole sequence, passed round the ring (below).
  const std::uint64_t b = run.micro_batch, s = run.seq_per_gpu(), h = m.hidden, a = m.heads, f = m.ffn, tp = run.tp;
  const std::uint64_t cp = run.cp;
  const std::uint64_t V_rows = vocab_rows(m, options.traits.vocab_pad_multiple);
  const std::uint64_t a_tp = share(a, tp), qkv_tp = share(m.qkv_width(), tp), hq_tp = share(m.out_width(), tp),
                      f_tp = share(f, tp), V_tp = share(V_rows, tp), s_rep = run.sequence_parallel ? share(s, tp) : s;
  const dtype act = layout.activations;
  const dtype gemm_in = layout.gemm_input_saved.value_or(act);  // fp8 saves GEMM inputs in fp8
  const bool dropout = run.dropout > 0.0, eager = run.attention == attention_kind::eager;
  const bool keep_layer = run.recompute != recompute_mode::full;
  const bool keep_core = run.recompute == recompute_mode::none;  // the attention core (s^2 buffers)
  const bool gpt = m.family == model_family::gpt;
  if (inv) inv->set_inflight(stage.inflight);

  // Work, for the operations: T tokens, E = T h elements of the residual stream, c bytes an activation, w a weight.
  const double T = static_cast<double>(s) * static_cast<double>(b), hd = static_cast<double>(h), E = T * hd;
  const double c = static_cast<double>(dtype_bytes(act)), w = static_cast<double>(dtype_bytes(layout.weights));
  // The vocabulary each GPU holds: tensor parallelism splits the table, the head's columns and the loss over the
  // vocabulary (Megatron-Core VocabParallelEmbedding, ColumnParallelLinear output layer, vocab_parallel_cross_entropy).
  const double V = static_cast<double>(m.vocab) / static_cast<double>(tp), Vp = static_cast<double>(V_tp);

  // ---- the embedding ------------------------------------------------------------------------------
  // The gather (and, in backward, the table's gradient over every stored row: a padded vocabulary's too). Its
  // input, and the dropout's mask on the embedding sum, kept to its backward: one per micro-batch in flight on
  // the first pipeline GPU; the targets on the last.
  if (ops) ops->head.add("embedding", op_class::embedding, E * (w + c), 1, E * c + Vp * hd * 4, 2);
  if (inv) {
    const std::uint64_t b_embed = checked_mul(b, stage.embedding_inflight, "activations in flight");
    if (stage.first)
      inv->span("batch.tokens", {b_embed, s}, dtype::i32, tensor_category::activations, event_kind::fwd_embed,
                event_kind::bwd_embed);
    if (stage.last)
      inv->span("batch.targets", {b, s}, dtype::i32, tensor_category::activations, event_kind::fwd_embed, event_kind::loss);
    if (dropout && stage.first)
      inv->span("embed.dropout_mask", {b_embed, s, h}, dtype::u8, tensor_category::activations, event_kind::fwd_embed,
                event_kind::bwd_embed);
  }

  // ---- one transformer layer (Korthikanti et al. 2022, Sec. 4.1, per-layer accounting) --------------
  // The first norm: it keeps its input, the residual stream entering the layer (which the previous layer or
  // the embedding writes), and its output, the QKV GEMM's input.
  if (ops) ops->norms.add("norm.attention", op_class::elementwise, 2 * E * c, 1, 4 * E * c, 2);
  if (inv) {
    inv->layer("layer{}.ln1.in", {b, s_rep, h}, act, true, /*is_layer_input=*/true);  // 2sbh
    inv->layer("layer{}.attn.qkv_in", {b, s_rep, h}, gemm_in, keep_layer);           // 2sbh
  }
  // The query, key and value projections. Multi-head latent attention (Megatron-Core MLASelfAttention): the down
  // projections, whose outputs their RMSNorms keep (the kv one with the RoPE key beside the latent), the normed
  // latents the up projections read (not split by tp: each rank computes them whole), RoPE on the rotary parts
  // and the keys assembled for every head.
  if (m.is_mla()) {
    const double qr = static_cast<double>(m.q_lora_rank), kvr = static_cast<double>(m.kv_lora_rank);
    const double rope = static_cast<double>(m.rope_head_dim), qw = static_cast<double>(m.q_width());
    const double kv_up = static_cast<double>(m.heads) * static_cast<double>(m.head_dim - m.rope_head_dim + m.v_dim());
    if (m.q_lora_rank > 0) {
      if (ops) {
        ops->layer.gemm("attention.q_down", T, qr, hd, c, c);
        ops->layer.add("norm.q_latent", op_class::elementwise, 2 * T * qr * c, 1, 4 * T * qr * c, 2);
        ops->layer.gemm("attention.q_up", T, qw, qr, c, c);
      }
      if (inv) {
        inv->layer("layer{}.attn.q_a", {b, s, m.q_lora_rank}, act, keep_layer);
        inv->layer("layer{}.attn.q_b_in", {b, s, m.q_lora_rank}, gemm_in, keep_layer);
      }
    } else if (ops) {
      ops->layer.gemm("attention.q", T, qw, hd, c, c);
    }
    if (ops) {
      ops->layer.gemm("attention.kv_down", T, kvr + rope, hd, c, c);
      ops->layer.add("norm.kv_latent", op_class::elementwise, 2 * T * kvr * c, 1, 4 * T * kvr * c, 2);
      ops->layer.gemm("attention.kv_up", T, kv_up, kvr, c, c);
      const double rotary = T * static_cast<double>(m.heads) * rope + T * rope, keys = T * static_cast<double>(m.kv_width());
      ops->layer.add("attention.rotary", op_class::elementwise, 2 * rotary * c + 2 * keys * c, 2, 2 * rotary * c, 1);
    }
    if (inv) {
      inv->layer("layer{}.attn.kv_a", {b, s, m.kv_lora_rank + m.rope_head_dim}, act, keep_layer);
      inv->layer("layer{}.attn.kv_b_in", {b, s, m.kv_lora_rank}, gemm_in, keep_layer);
    }
  } else if (ops) {
    ops->layer.gemm("attention.qkv", T, static_cast<double>(m.qkv_width()), hd, c, c);
  }
  if (inv) inv->layer("layer{}.attn.qkv", {b, s, qkv_tp}, act, keep_layer);  // 6sbh for MHA: Q, K (QK^T) and V
  // The attention core. Flash attention keeps the fp32 log-sum-exp of each row (Dao et al. 2022, Alg. 2) and
  // regenerates its dropout mask from the RNG state: nothing of size s^2; it recomputes the scores in its
  // backward, and skips the keys outside a sliding window when the stack hands it the window (the layers'
  // average). Eager attention keeps the softmax (and its dropout's mask and output) and computes every key.
  const double qw = static_cast<double>(m.q_width()), ow = static_cast<double>(m.out_width());
  if (!eager) {
    if (ops) {
      // Each of this GPU's T queries meets the whole sequence's keys, under context parallelism too.
      const double keys = kernel_skips_window(run, options.traits) ? attended_keys(m, run.seq) / static_cast<double>(m.layers)
                                                                   : static_cast<double>(run.seq);
      const double attention_flops = 2 * T * keys * (qw + ow);  // planner/time/flops.hpp
      // Context parallelism runs the kernel once per ring step, each reading the queries and one block of keys and
      // values and writing a partial output (Transformer Engine, AttnFuncWithCPAndKVP2P: cp steps a pass).
      const double steps = static_cast<double>(cp);
      const double io = steps * T * (qw + static_cast<double>(m.kv_width()) + static_cast<double>(m.v_width()) + ow) * c;
      ops->layer.add("attention.flash", op_class::attention, io, steps, 2.5 * io, 2 * steps, attention_flops,
                     3 * attention_flops, true);
      if (cp > 1) {
        // The merge of the steps' partial outputs: forward, each step's log-sum-exp folded into the running one and
        // each partial output rescaled into the result (flash_attn_fwd_softmax_lse_correction, flash_attn_fwd_out_
        // correction); backward, each step's key and value gradients added to the block travelling the ring and its
        // query gradient to this GPU's.
        const double kv = T * static_cast<double>(m.kv_width() + m.v_width());
        ops->layer.add("attention.cp_merge", op_class::elementwise, (2 * steps + 1) * T * ow * c, 2 * steps - 1,
                       3 * steps * (kv + T * qw) * c, 2 * steps, 0, 0, true);
      }
    }
    if (inv) inv->layer("layer{}.attn.lse", {b, a_tp, s}, dtype::fp32, keep_layer);
    if (inv && cp > 1) {
      // Transformer Engine's ring (AttnFuncWithCPAndKVP2P, cp_comm_type "p2p"), working sets of the layer's attention
      // on the GPU that does the most (the last: every step computes its whole query block). Forward: the cp key and
      // value blocks it sends on and receives (the first a copy of its own, the last saved for the backward in place
      // of its own), each step's partial output and log-sum-exp, all held until they are merged. Backward: the two
      // send and receive buffers, each a key and value block with its gradient, and the query gradient's buffer.
      const std::uint64_t kv_tp = share(m.kv_width(), tp) + share(m.v_width(), tp), q_tp = share(m.q_width(), tp);
      const std::int64_t fwd0 = inv->fwd_layer0(), bwd0 = inv->bwd_layer0();
      const event_interval forward{fwd0, 1, fwd0, 1}, rerun{bwd0, -1, bwd0, -1};
      auto forward_set = [&](std::string_view name, const tensor_shape& shape, dtype type) {
        if (keep_layer) inv->layer_intervals(name, shape, type, tensor_category::activations, {forward});
        else inv->layer_intervals(name, shape, type, tensor_category::activations, {forward, rerun});  // recomputed
      };
      forward_set("layer{}.attn.cp_ring_kv", {cp - 1, b, s, kv_tp}, act);
      forward_set("layer{}.attn.cp_ring_out", {cp, b, s, hq_tp}, act);
      forward_set("layer{}.attn.cp_ring_lse", {cp, b, a_tp, s}, dtype::fp32);
      inv->layer_intervals("layer{}.attn.cp_ring_grad_kv", {4, b, s, kv_tp}, act, tensor_category::activation_grads, {rerun});
      inv->layer_intervals("layer{}.attn.cp_ring_grad_q", {b, s, q_tp}, act, tensor_category::activation_grads, {rerun});
    }
  } else {
    if (ops) {
      const double sd = static_cast<double>(s), batches = static_cast<double>(m.heads) * static_cast<double>(b);
      const double N = batches * sd * sd;
      ops->layer.gemm("attention.scores", sd, sd, static_cast<double>(m.head_dim), c, c, true, op_class::attention, batches,
                      true, true);
      ops->layer.add("attention.softmax", op_class::attention, 2 * N * c, 1, 3 * N * c, 1, 0, 0, true);
      // Dropout on the probabilities as its own kernel (fused_layer_options::attention_dropout_kernel): forward, the
      // probabilities read, the dropped ones and the one-byte mask written (torch's native_dropout); backward, the
      // gradient and the mask read, the probabilities' gradient written (native_dropout_backward). Part of the attention
      // core: selective recomputation reruns it.
      if (dropout && options.attention_dropout_kernel)
        ops->layer.add("attention.dropout", op_class::attention, 2 * N * c + N, 1, 2 * N * c + N, 1, 0, 0, true);
      ops->layer.gemm("attention.values", sd, static_cast<double>(m.v_dim()), sd, c, c, true, op_class::attention, batches,
                      true, true);
    }
    if (inv) {
      inv->layer("layer{}.attn.softmax", {b, a_tp, s, s}, act, keep_layer && keep_core);  // 2as^2b
      if (dropout) {
        inv->layer("layer{}.attn.softmax_dropout_mask", {b, a_tp, s, s}, dtype::u8, keep_layer && keep_core);  // as^2b
        inv->layer("layer{}.attn.softmax_dropout", {b, a_tp, s, s}, act, keep_layer && keep_core);             // 2as^2b
      }
    }
  }
  // The output projection, which keeps its input (the attention's output), then the residual add with its
  // dropout, and the MLP's norm (one kernel with the add in the harness: kernels/norm.hpp residual_norm_forward).
  if (ops) ops->layer.gemm("attention.out", T, hd, ow, c, c);
  if (inv) {
    inv->layer("layer{}.attn.out_in", {b, s, hq_tp}, gemm_in, keep_layer);                      // 2sbh
    if (dropout) inv->layer("layer{}.attn.dropout_mask", {b, s_rep, h}, dtype::u8, keep_layer);  // sbh
    inv->layer("layer{}.ln2.in", {b, s_rep, h}, act, keep_layer);                                // 2sbh
    inv->layer("layer{}.mlp.fc_in", {b, s_rep, h}, gemm_in, keep_layer);                         // 2sbh
  }
  if (ops) {
    if (options.fused_residual_norm) {
      ops->norms.add("residual_norm.mlp", op_class::elementwise, 4 * E * c, 1, 4 * E * c, 2);
    } else {
      ops->norms.add("residual.attention", op_class::elementwise, 3 * E * c, 1, 0, 0);
      ops->norms.add("norm.mlp", op_class::elementwise, 2 * E * c, 1, 4 * E * c, 2);
    }
  }
  // The MLP. GPT: fc, GELU (its input and output kept; llm.c recomputes it in backward when any recomputation
  // is on), the down projection.
  if (gpt) {
    if (ops) {
      const double ff = static_cast<double>(f), F = T * ff;
      const bool gelu_recomputed = options.recomputes_gelu && run.recompute != recompute_mode::none;
      ops->layer.gemm("mlp.fc", T, ff, hd, c, c);
      ops->layer.add("mlp.gelu", op_class::elementwise, 2 * F * c, 1, (gelu_recomputed ? 5 : 3) * F * c, gelu_recomputed ? 2 : 1);
      ops->layer.gemm("mlp.down", T, hd, ff, c, c);
    }
    if (inv) {
      inv->layer("layer{}.mlp.gelu_in", {b, s, f_tp}, act, keep_layer);      // 8sbh at f = 4h
      inv->layer("layer{}.mlp.proj_in", {b, s, f_tp}, gemm_in, keep_layer);  // 8sbh: GELU output
    }
  } else if (!m.is_moe() || m.dense_layers > 0) {
    // The llama family's gated MLP: gate and up as one GEMM, SwiGLU (its backward needs gate and up), down.
    // DeepSeek-V3's dense first layers hold a dense MLP of their own width; the MoE layers after them, below.
    if (ops) {
      const double fd = static_cast<double>(m.dense_mlp_width()), F = T * fd;
      ops->dense_mlp.gemm("mlp.gate_up", T, 2 * fd, hd, c, c);
      ops->dense_mlp.add("mlp.swiglu", op_class::elementwise, 3 * F * c, 1, 5 * F * c, 1);
      ops->dense_mlp.gemm("mlp.down", T, hd, fd, c, c);
    }
    if (inv) {
      if (m.is_moe()) inv->set_layer_range(0, m.dense_layers);
      const std::uint64_t fd_tp = share(m.dense_mlp_width(), tp);
      inv->layer("layer{}.mlp.gate", {b, s, fd_tp}, act, keep_layer);
      inv->layer("layer{}.mlp.up", {b, s, fd_tp}, act, keep_layer);
      inv->layer("layer{}.mlp.down_in", {b, s, fd_tp}, gemm_in, keep_layer);  // silu(gate) * up
    }
  }
  if (!gpt && m.is_moe()) {
    // Mixture of Experts (Megatron-Core MoELayer with the all-to-all dispatcher): the router's GEMM, its fp32
    // probabilities (softmax's backward needs them) and the top-k choice and weights; the tokens permuted to
    // their experts (the experts' GEMM input; after the all-to-all each GPU holds R rows of its experts when
    // routing is balanced); each local expert's two GEMMs over its R / (E/ep) rows and its SwiGLU intermediates;
    // the expert outputs, which the weighted unpermutation's backward reads. Rows: planner/run/moe.hpp (k b s
    // dropless, padded to the capacity otherwise; padded rows are computed like real ones). The all-to-all
    // itself is communication.
    const std::uint64_t R = routed_rows(m, run), k = m.experts_per_token;
    if (ops) {
      const double ff = static_cast<double>(f), Ed = static_cast<double>(m.experts), kd = static_cast<double>(k);
      const double Rd = static_cast<double>(R), local = static_cast<double>(local_experts(m, run));
      ops->moe_mlp.gemm("moe.router", T, Ed, hd, c, c);
      ops->moe_mlp.add("moe.routing", op_class::elementwise, T * Ed * (c + 4) + T * kd * 12, 2, T * Ed * 8 + T * kd * 8, 2);
      ops->moe_mlp.add("moe.permute", op_class::elementwise, T * hd * c + Rd * hd * c + Rd * 8, 1, 2 * Rd * hd * c, 1);
      ops->moe_mlp.gemm("moe.experts.gate_up", Rd / local, 2 * ff, hd, c, c, true, op_class::gemm, local);
      ops->moe_mlp.add("moe.swiglu", op_class::elementwise, 3 * Rd * ff * c, 1, 5 * Rd * ff * c, 1);
      ops->moe_mlp.gemm("moe.experts.down", Rd / local, hd, ff, c, c, true, op_class::gemm, local);
      ops->moe_mlp.add("moe.unpermute", op_class::elementwise, Rd * hd * c + Rd * 4 + T * hd * c, 1,
                       2 * Rd * hd * c + T * hd * c, 1);
    }
    if (inv) {
      inv->set_layer_range(m.dense_layers, m.layers);
      const std::uint64_t tokens = checked_mul(b, s, "tokens");
      inv->layer("layer{}.moe.router_probs", {tokens, m.experts}, dtype::fp32, keep_layer);
      inv->layer("layer{}.moe.topk_indices", {tokens, k}, dtype::i64, keep_layer);
      inv->layer("layer{}.moe.topk_weights", {tokens, k}, dtype::fp32, keep_layer);
      inv->layer("layer{}.moe.permuted_in", {R, h}, gemm_in, keep_layer);
      inv->layer("layer{}.mlp.gate", {R, f_tp}, act, keep_layer);
      inv->layer("layer{}.mlp.up", {R, f_tp}, act, keep_layer);
      inv->layer("layer{}.mlp.down_in", {R, f_tp}, gemm_in, keep_layer);
      inv->layer("layer{}.moe.expert_out", {R, h}, act, keep_layer);
      if (run.ep > 1) {
        // The all-to-all (Megatron-Core MoEAlltoAllTokenDispatcher): the permuted rows go to the GPUs that hold
        // their experts and the expert outputs come back, a send and a receive buffer of R rows each, in the
        // layer's forward and again in its backward (balanced routing: each GPU receives as many as it sends).
        const std::int64_t fwd0 = inv->fwd_layer0(), bwd0 = inv->bwd_layer0();
        inv->layer_intervals("layer{}.moe.all_to_all", {2, R, h}, act, tensor_category::activations,
                             {{fwd0, 1, fwd0, 1}, {bwd0, -1, bwd0, -1}});
      }
    }
    // Qwen2-MoE's and DeepSeek's shared experts: a dense SwiGLU over every token, scaled by a sigmoid gate
    // (Qwen2-MoE) or added as it is (DeepSeek).
    if (m.shared_expert_ffn > 0) {
      if (ops) {
        const double fs = static_cast<double>(m.shared_expert_ffn);
        ops->moe_mlp.gemm("moe.shared.gate_up", T, 2 * fs, hd, c, c);
        ops->moe_mlp.add("moe.shared.swiglu", op_class::elementwise, 3 * T * fs * c, 1, 5 * T * fs * c, 1);
        ops->moe_mlp.gemm("moe.shared.down", T, hd, fs, c, c);
        if (m.shared_expert_gate) {
          ops->moe_mlp.gemm("moe.shared.gate", T, 1, hd, c, c);
          ops->moe_mlp.add("moe.shared.scale", op_class::elementwise, 3 * T * hd * c, 2, 5 * T * hd * c, 2);
        } else {
          ops->moe_mlp.add("moe.shared.add", op_class::elementwise, 3 * T * hd * c, 1, 0, 0);
        }
      }
      if (inv) {
        const std::uint64_t fs_tp = share(m.shared_expert_ffn, tp);
        inv->layer("layer{}.moe.shared.gate", {b, s, fs_tp}, act, keep_layer);
        inv->layer("layer{}.moe.shared.up", {b, s, fs_tp}, act, keep_layer);
        inv->layer("layer{}.moe.shared.down_in", {b, s, fs_tp}, gemm_in, keep_layer);
      }
    }
    if (inv) inv->all_layers();
  }
  // The second residual add, and the two dropouts (the attention's, whose mask is above, and the MLP's): one
  // kernel each way, reading and writing the stream and its mask.
  if (ops) {
    ops->norms.add("residual.mlp", op_class::elementwise, 3 * E * c, 1, 0, 0);
    if (dropout) ops->norms.add("dropout", op_class::elementwise, 2 * (2 * E * c + E), 2, 2 * (2 * E * c + E), 2);
  }
  if (inv && dropout) inv->layer("layer{}.mlp.dropout_mask", {b, s_rep, h}, dtype::u8, keep_layer);  // sbh
  // Autocast's copies of each layer's GEMM weights (an amp regime), kept for the backward: a dense layer's, or an
  // MoE layer's with its local experts (DeepSeek's dense first layers and its MoE layers differ).
  if (inv && layout.autocast_weight_cache) {
    const param_counts& pc = memory->counts;
    const std::uint64_t layer_experts = share(pc.routed_experts_per_layer, tp);
    auto local_weights = [&](std::uint64_t elements, std::uint64_t experts) { return elements - experts + experts / run.ep; };
    auto cache = [&](std::uint64_t first, std::uint64_t end, std::uint64_t elements) {
      inv->set_layer_range(first, end);
      inv->layer("layer{}.autocast.weights", {elements}, dtype::bf16, keep_layer, false, tensor_category::weights).role =
          tensor_role::frozen_weights;
    };
    if (!m.is_moe()) cache(0, m.layers, share(pc.matmul_per_layer, tp));
    if (m.dense_layers > 0) cache(0, m.dense_layers, share(pc.matmul_per_dense_layer, tp));
    if (m.is_moe()) cache(m.dense_layers, m.layers, local_weights(share(pc.matmul_per_layer, tp), layer_experts));
    inv->all_layers();
  }

  // ---- the head and the loss ------------------------------------------------------------------------
  // The final norm, the output projection over every stored vocabulary row, and the loss over the V classes.
  // A pipeline stage before the last sends its output on and frees it (Megatron deallocates the output tensor).
  if (ops) {
    ops->head.add("norm.final", op_class::elementwise, 2 * E * c, 1, 4 * E * c, 2);
    ops->head.gemm("lm_head", T, Vp, hd, c, c);
    if (options.loss == fused_loss::fused_classifier)
      ops->head.add("loss.fused_classifier", op_class::loss, 2 * T * V * c, 1, 0, 0);
    else
      ops->head.add("loss.cross_entropy", op_class::loss, T * V * c + T * 8, 1, 2 * T * V * c, 1);
  }
  const std::int64_t last_layer = static_cast<std::int64_t>(m.layers) - 1;
  if (inv && !stage.last) {
    inv->span("pipeline.output", {b, s_rep, h}, act, tensor_category::activations, event_kind::fwd_layer,
              event_kind::fwd_head, last_layer);
  } else if (inv) {
    inv->span("final_norm.in", {b, s, h}, act, tensor_category::activations, event_kind::fwd_layer, event_kind::bwd_head,
              last_layer);
    inv->span("lm_head.in", {b, s, h}, gemm_in, tensor_category::activations, event_kind::fwd_head, event_kind::bwd_head);
    if (layout.autocast_weight_cache)
      inv->span("lm_head.autocast.weight", {V_tp, h}, dtype::bf16, tensor_category::weights, event_kind::fwd_head,
                event_kind::bwd_head)
          .role = tensor_role::frozen_weights;
    if (options.loss == fused_loss::fused_classifier) {
      // llm.c's fused classifier: softmax and cross-entropy in fp32 registers, the logits' gradient written over
      // the logits, which live on into the head's backward; V_rows wide, the padded columns never in the loss.
      inv->span("logits", {b, s, V_tp}, act, tensor_category::logits, event_kind::fwd_head, event_kind::bwd_head);
    } else {
      inv->span("logits", {b, s, V_tp}, act, tensor_category::logits, event_kind::fwd_head, event_kind::loss);
      // Megatron's loss runs on an fp32 copy of the logits (vocab_parallel_cross_entropy upcasts them).
      if (act != dtype::fp32)
        inv->span("logits.fp32", {b, s, V_tp}, dtype::fp32, tensor_category::logits, event_kind::loss, event_kind::loss);
      inv->span("logits.grad", {b, s, V_tp}, act, tensor_category::logits, event_kind::loss, event_kind::bwd_head);
    }
  }

  // ---- the backward's gradient buffers, reused by every layer (as llm.c does) -----------------------------
  if (!inv) return;
  auto bwd_buffer = [&](std::string_view name, tensor_shape shape) {
    inv->span(name, shape, act, tensor_category::activation_grads, event_kind::bwd_head, event_kind::bwd_embed);
  };
  bwd_buffer("bwd.d_residual", {b, s, h});  // the gradient flowing down the residual stream
  bwd_buffer("bwd.d_hidden", {b, s, h});    // the gradient of a sub-block's input or output
  bwd_buffer("bwd.d_qkv", {b, s, qkv_tp});
  if (m.is_mla())  // the latents' gradients, on their way back through the up and down projections
    bwd_buffer("bwd.d_latent", {b, s, m.q_lora_rank + m.kv_lora_rank + m.rope_head_dim});
  // d_ffn holds the MLP's inner gradients (gate and up for SwiGLU), and, once the MLP is done, the gradient of
  // the attention output: it is as wide as the larger of the two.
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
    // The experts' rows' gradient, (R, h): of the expert outputs (the combine's backward) until the down GEMMs'
    // backward reads it, then of the permuted inputs (the gate/up GEMMs' backward, while d_ffn still holds d_gate
    // and d_up) until the permutation's backward adds it to the tokens. Megatron's autograd allocates these two
    // in turn; the harness reuses one buffer for every layer.
    bwd_buffer("bwd.d_expert_rows", {routed_rows(m, run), h});
  }
  if (eager) bwd_buffer("bwd.d_scores", {b, a_tp, s, s});
  else inv->span("bwd.flash_delta", {b, a_tp, s}, dtype::fp32, tensor_category::activation_grads, event_kind::bwd_head,
                 event_kind::bwd_embed);  // rowsum(dO * O), FlashAttention-2 backward
}

}  // namespace trainplan
