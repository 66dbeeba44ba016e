// Parameter tensors and their exact counts (param_count.hpp), tensor by tensor as the modelling code of each
// family declares them (GPT-2, the Llama family's dense and MoE MLPs, DeepSeek's latent attention), and the
// padded vocabulary rows.
#include "planner/model/param_count.hpp"

#include "planner/util/checked_math.hpp"

namespace trainplan {
namespace {

void add(std::vector<param_tensor>& out, std::string name, std::vector<std::uint64_t> shape, bool per_layer,
         bool matmul, param_role role = param_role::layer) {
  std::uint64_t count = 1;
  for (std::uint64_t d : shape) count = checked_mul(count, d, "parameter count");
  out.push_back({std::move(name), std::move(shape), count, per_layer, matmul, count});
  out.back().role = role;
}

// The tensors added from here on that belong to one kind of layer only (DeepSeek-V3's dense first layers).
void mark_layers(std::vector<param_tensor>& out, std::size_t from, layer_set in_layers) {
  for (std::size_t i = from; i < out.size(); ++i) out[i].in_layers = in_layers;
}

// A tensor of `experts` stacked expert weights (the leading dimension), of which a token uses `top_k`.
void add_experts(std::vector<param_tensor>& out, std::string name, std::uint64_t experts, std::uint64_t top_k,
                 std::uint64_t rows, std::uint64_t cols) {
  add(out, std::move(name), {experts, rows, cols}, true, true);
  out.back().active = checked_product({top_k, rows, cols}, "parameter count");
  out.back().routed_expert = true;
}

// The gated MLP of the llama family, dense or as experts (HF MixtralSparseMoeBlock, Qwen2MoeSparseMoeBlock,
// Qwen3MoeSparseMoeBlock): router (E, h), then gate/up (f, h) and down (h, f) per expert; Qwen2-MoE adds a
// shared expert of its own width and its sigmoid gate (1, h).
// DeepSeek-V3 (HF DeepseekV3MoE) has dense first layers of their own width before its MoE layers, and
// shared experts without a gate (n_shared_experts of them, one MLP of their summed width).
void add_llama_mlp(std::vector<param_tensor>& t, const model_spec& m) {
  const std::uint64_t h = m.hidden, f = m.ffn;
  if (!m.is_moe() || m.dense_layers > 0) {
    const std::size_t from = t.size();
    const std::uint64_t fd = m.dense_mlp_width();
    add(t, "layer{}.mlp.gate.weight", {fd, h}, true, true);
    add(t, "layer{}.mlp.up.weight", {fd, h}, true, true);
    add(t, "layer{}.mlp.down.weight", {h, fd}, true, true);
    if (!m.is_moe()) return;
    mark_layers(t, from, layer_set::dense);
  }
  const std::size_t moe_from = t.size();
  add(t, "layer{}.moe.router.weight", {m.experts, h}, true, true);
  add_experts(t, "layer{}.moe.experts.gate.weight", m.experts, m.experts_per_token, f, h);
  add_experts(t, "layer{}.moe.experts.up.weight", m.experts, m.experts_per_token, f, h);
  add_experts(t, "layer{}.moe.experts.down.weight", m.experts, m.experts_per_token, h, f);
  if (m.shared_expert_ffn > 0) {
    const std::uint64_t fs = m.shared_expert_ffn;
    add(t, "layer{}.moe.shared.gate.weight", {fs, h}, true, true);
    add(t, "layer{}.moe.shared.up.weight", {fs, h}, true, true);
    add(t, "layer{}.moe.shared.down.weight", {h, fs}, true, true);
    if (m.shared_expert_gate) add(t, "layer{}.moe.shared_gate.weight", {1, h}, true, true);
  }
  if (m.dense_layers > 0) mark_layers(t, moe_from, layer_set::moe);
}

// Multi-head latent attention (HF DeepseekV3Attention): q_a_proj and q_a_layernorm, q_b_proj (or q_proj);
// kv_a_proj_with_mqa (the latent and the shared RoPE key), kv_a_layernorm, kv_b_proj (each head's
// non-RoPE key and its value); o_proj from the heads' values.
void add_mla(std::vector<param_tensor>& t, const model_spec& m) {
  const std::uint64_t h = m.hidden, nope = m.head_dim - m.rope_head_dim;
  if (m.q_lora_rank > 0) {
    add(t, "layer{}.attn.q_a.weight", {m.q_lora_rank, h}, true, true);
    add(t, "layer{}.attn.q_a_norm.weight", {m.q_lora_rank}, true, false);
    add(t, "layer{}.attn.q_b.weight", {m.q_width(), m.q_lora_rank}, true, true);
  } else {
    add(t, "layer{}.attn.q.weight", {m.q_width(), h}, true, true);
  }
  add(t, "layer{}.attn.kv_a.weight", {m.kv_lora_rank + m.rope_head_dim, h}, true, true);
  add(t, "layer{}.attn.kv_a_norm.weight", {m.kv_lora_rank}, true, false);
  add(t, "layer{}.attn.kv_b.weight", {checked_mul(m.heads, nope + m.v_dim(), "parameter count"), m.kv_lora_rank}, true, true);
  add(t, "layer{}.attn.out.weight", {h, m.out_width()}, true, true);
}

}  // namespace

std::vector<param_tensor> param_tensors(const model_spec& m) {
  const std::uint64_t h = m.hidden, f = m.ffn, v = m.vocab;  // f: the gpt MLP; llama: add_llama_mlp
  std::vector<param_tensor> t;
  add(t, "embed.tokens", {v, h}, false, false, param_role::token_embedding);
  if (m.max_positions > 0) add(t, "embed.positions", {m.max_positions, h}, false, false, param_role::position_embedding);

  if (m.family == model_family::gpt) {
    // GPT-2 block (Radford et al. 2019; HF GPT2Block): ln_1, c_attn (h -> 3h), c_proj, ln_2, c_fc (h -> f),
    // c_proj (f -> h), each linear with a bias, each LayerNorm with weight and bias.
    add(t, "layer{}.ln1.weight", {h}, true, false);
    add(t, "layer{}.ln1.bias", {h}, true, false);
    add(t, "layer{}.attn.qkv.weight", {m.qkv_width(), h}, true, true, param_role::layer_qkv_weight);
    add(t, "layer{}.attn.qkv.bias", {m.qkv_width()}, true, false, param_role::layer_qkv_bias);
    add(t, "layer{}.attn.out.weight", {h, m.q_width()}, true, true);
    add(t, "layer{}.attn.out.bias", {h}, true, false);
    add(t, "layer{}.ln2.weight", {h}, true, false);
    add(t, "layer{}.ln2.bias", {h}, true, false);
    add(t, "layer{}.mlp.fc.weight", {f, h}, true, true);
    add(t, "layer{}.mlp.fc.bias", {f}, true, false);
    add(t, "layer{}.mlp.proj.weight", {h, f}, true, true);
    add(t, "layer{}.mlp.proj.bias", {h}, true, false);
    add(t, "final_norm.weight", {h}, false, false, param_role::final_norm);
    add(t, "final_norm.bias", {h}, false, false, param_role::final_norm);
  } else {
    // Llama block (Touvron et al. 2023; HF LlamaDecoderLayer): input RMSNorm, q/k/v/o (GQA: k and v are
    // kv_heads*head_dim wide), post-attention RMSNorm, SwiGLU gate/up (h -> f) and down (f -> h).
    // With 4 norms (Gemma 2, HF Gemma2DecoderLayer) the attention output and the MLP output are normed too,
    // before each residual add: input, post_attention, pre_feedforward and post_feedforward RMSNorms, (h) each.
    // GeGLU has SwiGLU's shapes; Phi-3's fused qkv_proj and gate_up_proj hold the same weights, concatenated.
    const bool post_norms = m.norms_per_layer == 4;
    add(t, "layer{}.ln1.weight", {h}, true, false);
    if (m.is_mla()) {
      add_mla(t, m);
    } else {
      add(t, "layer{}.attn.qkv.weight", {m.qkv_width(), h}, true, true, param_role::layer_qkv_weight);
      if (m.qkv_bias) add(t, "layer{}.attn.qkv.bias", {m.qkv_width()}, true, false, param_role::layer_qkv_bias);
      add(t, "layer{}.attn.out.weight", {h, m.out_width()}, true, true);
    }
    if (m.qk_norm) {  // Qwen3: RMSNorm over each head's q and k before RoPE (HF Qwen3Attention)
      add(t, "layer{}.attn.q_norm.weight", {m.head_dim}, true, false);
      add(t, "layer{}.attn.k_norm.weight", {m.head_dim}, true, false);
    }
    if (post_norms) add(t, "layer{}.attn.post_norm.weight", {h}, true, false);
    add(t, "layer{}.ln2.weight", {h}, true, false);
    add_llama_mlp(t, m);
    if (post_norms) add(t, "layer{}.mlp.post_norm.weight", {h}, true, false);
    add(t, "final_norm.weight", {h}, false, false, param_role::final_norm);
  }
  if (!m.tied_embeddings) add(t, "lm_head.weight", {v, h}, false, true, param_role::head);
  return t;
}

param_counts count_params(const model_spec& m) {
  const char* what = "parameter count";
  param_counts c;
  const layer_counts layers(m);
  std::uint64_t active_outside_layers = 0, active_layers = 0;
  for (const param_tensor& p : param_tensors(m)) {
    if (!p.per_layer) {
      active_outside_layers = checked_add(active_outside_layers, p.active, what);
      if (p.embedding()) c.embedding = checked_add(c.embedding, p.count, what);
      else if (p.role == param_role::final_norm) c.final_norm = checked_add(c.final_norm, p.count, what);
      else c.lm_head = checked_add(c.lm_head, p.count, what);
      continue;
    }
    const std::uint64_t n = layers.of(p.in_layers);
    c.layers_total = checked_add(c.layers_total, checked_mul(p.count, n, what), what);
    active_layers = checked_add(active_layers, checked_mul(p.active, n, what), what);
    if (p.matmul) {
      c.matmul_layers_total = checked_add(c.matmul_layers_total, checked_mul(p.count, n, what), what);
      c.active_matmul_layers_total = checked_add(c.active_matmul_layers_total, checked_mul(p.active, n, what), what);
    }
    // One layer of each kind: an MoE layer (or every layer) holds the `all` and `moe` tensors, a dense first
    // layer the `all` and `dense` ones.
    if (p.in_layers != layer_set::dense) {
      c.per_layer = checked_add(c.per_layer, p.count, what);
      if (p.matmul) c.matmul_per_layer = checked_add(c.matmul_per_layer, p.count, what);
    }
    if (m.dense_layers > 0 && p.in_layers != layer_set::moe) {
      c.per_dense_layer = checked_add(c.per_dense_layer, p.count, what);
      if (p.matmul) c.matmul_per_dense_layer = checked_add(c.matmul_per_dense_layer, p.count, what);
    }
    if (p.routed_expert) {
      c.routed_experts = checked_add(c.routed_experts, checked_mul(p.count, n, what), what);
      c.routed_experts_per_layer = checked_add(c.routed_experts_per_layer, p.count, what);
    }
  }
  c.total = checked_add(checked_add(c.embedding, c.layers_total, what), checked_add(c.final_norm, c.lm_head, what), what);
  // The output projection is a GEMM whether or not its weight is shared with the token embedding.
  const std::uint64_t head_gemm = checked_mul(m.vocab, m.hidden, what);
  c.matmul = checked_add(c.matmul_layers_total, head_gemm, what);
  c.active = checked_add(active_layers, active_outside_layers, what);
  c.active_matmul = checked_add(c.active_matmul_layers_total, head_gemm, what);
  // Ultra-scale Playbook (seed 001), "Memory for weights/grads/optimizer states": N = 12 L h^2 + V h
  // (biases, norms and position embeddings left out).
  c.approx_12lh2_vh = checked_add(checked_product({12, m.layers, m.hidden, m.hidden}, "parameter count"),
                                  head_gemm, what);
  return c;
}

std::uint64_t vocab_rows(const model_spec& m, std::uint64_t pad_multiple) {
  if (pad_multiple <= 1) return m.vocab;
  return checked_add(m.vocab, pad_multiple - 1, "padded vocabulary") / pad_multiple * pad_multiple;
}

model_spec with_vocab_rows(const model_spec& m, std::uint64_t rows) {
  model_spec padded = m;
  padded.vocab = rows;
  return padded;
}

}  // namespace trainplan
