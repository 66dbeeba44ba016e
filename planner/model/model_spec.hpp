#pragma once
// The shape of a decoder-only transformer, for the two families the planner models.
#include <cstdint>
#include <string>
#include <string_view>

namespace trainplan {

// gpt: GPT-2/GPT-3. LayerNorm with bias, GELU MLP of width ffn (4h), biases on every linear layer,
//      learned position embeddings (max_positions rows), tied input/output embeddings.
// llama: RMSNorm, SwiGLU MLP (gate, up, down) of width ffn, grouped-query attention (kv_heads), RoPE
//      (no position parameters), no biases (qkv_bias for Qwen2-style models), tied or untied embeddings.
enum class model_family { gpt, llama };

std::string_view family_name(model_family f);
model_family parse_family(std::string_view text);  // throws input_error

// The activation on the gate of the llama family's gated MLP; both have the same parameter shapes.
// silu: SwiGLU (Shazeer 2020; Llama, Qwen2, Phi-3). gelu_tanh: GeGLU with the tanh GELU (Gemma 2,
// HF hidden_activation "gelu_pytorch_tanh").
enum class gate_activation { silu, gelu_tanh };

std::string_view gate_activation_name(gate_activation g);
gate_activation parse_gate_activation(std::string_view text);  // throws input_error

struct model_spec {
  std::string name = "custom";   // preset name, "hf:<path>", "derived" or "custom"
  model_family family = model_family::llama;
  std::uint64_t layers = 0;
  std::uint64_t hidden = 0;
  std::uint64_t heads = 0;
  std::uint64_t kv_heads = 0;
  std::uint64_t head_dim = 0;       // hidden / heads unless a config says otherwise
  std::uint64_t ffn = 0;            // MLP inner width
  std::uint64_t vocab = 0;
  std::uint64_t max_positions = 0;  // rows of the learned position table; 0 with RoPE
  bool tied_embeddings = false;
  bool qkv_bias = false;            // llama family only: q/k/v projections carry biases (Qwen2)
  bool fused_projections = false;   // llama family only: the Hugging Face model fuses q/k/v into one qkv_proj and
                                    // gate/up into one gate_up_proj (Phi-3; same weights, concatenated), which
                                    // LoRA through peft adapts as single modules
  double dropout = 0.0;             // the model's default dropout probability

  // Gemma 2 (Gemma Team 2024, "Gemma 2", Sec. 2; HF Gemma2DecoderLayer). Every default below leaves a
  // model as the two families above describe it.
  std::uint64_t norms_per_layer = 2;  // 2: before attention and before the MLP. 4 (llama family only): also
                                      // on the attention output and on the MLP output ("sandwich" norms)
  gate_activation mlp_gate = gate_activation::silu;
  bool embed_scale_sqrt_hidden = false;  // the token embedding is multiplied by sqrt(hidden) (Gemma)
  double attn_logit_softcap = 0.0;       // scores -> cap * tanh(scores / cap) before the softmax; 0: none
  double final_logit_softcap = 0.0;      // logits -> cap * tanh(logits / cap) before the loss; 0: none
  std::uint64_t sliding_window_tokens = 0;        // a sliding layer attends to the last this-many keys; 0: none
  std::uint64_t sliding_window_global_every = 0;  // with a window: every Nth layer (0-based N-1, 2N-1, ...)
                                                  // attends to all keys; 0: every layer slides (Mistral v0.1)

  // Mixture of Experts (llama family; Fedus et al. 2022, Switch Transformers; Jiang et al. 2024, Mixtral;
  // HF MixtralSparseMoeBlock, Qwen2MoeSparseMoeBlock, Qwen3MoeSparseMoeBlock). Each layer's MLP becomes
  // `experts` gated MLPs, each of width ffn (HF's moe_intermediate_size where a config has both), and a
  // router (h -> experts, no bias); each token goes to experts_per_token of them, weighted by its router
  // probabilities. 0 experts: one dense MLP of width ffn.
  std::uint64_t experts = 0;
  std::uint64_t experts_per_token = 0;  // top-k
  std::uint64_t shared_expert_ffn = 0;  // Qwen2-MoE: one always-on gated MLP of this width beside the routed
                                        // ones, scaled by a sigmoid gate (h -> 1); 0: none
  bool qk_norm = false;                 // RMSNorm over each head's q and k, (head_dim) each (Qwen3)
  bool shared_expert_gate = true;       // the shared expert is scaled by sigmoid(h -> 1) (Qwen2-MoE); DeepSeek's is not
  // DeepSeek-V3 (DeepSeek-AI 2024, arXiv:2412.19437, Sec. 4.2; HF DeepseekV3DecoderLayer): with experts, the
  // first dense_layers layers keep one dense gated MLP of width dense_ffn (HF first_k_dense_replace and
  // intermediate_size); the layers after them are MoE layers.
  std::uint64_t dense_layers = 0;
  std::uint64_t dense_ffn = 0;
  // DeepSeek-V3's auxiliary-loss-free balancing (Sec. 2.1.2): a bias per expert added to the routing scores,
  // an fp32 buffer the balancing rule updates, not a parameter (HF e_score_correction_bias, register_buffer).
  bool router_score_bias = false;

  // Multi-head latent attention (DeepSeek-AI 2024, DeepSeek-V2, arXiv:2405.04434, Sec. 2.1; HF
  // DeepseekV3Attention). Keys and values come from a compressed latent c_kv = kv_a(x) of kv_lora_rank
  // (RMSNorm-ed, then kv_b: kv_lora_rank -> heads x (head_dim - rope_head_dim + v_head_dim)); kv_a also
  // writes a rope_head_dim-wide key that carries RoPE and is shared by every head. Queries go through a
  // latent of q_lora_rank the same way (q_a, RMSNorm, q_b), or through one projection when it is 0. A q/k
  // head is head_dim = qk_nope_head_dim + rope_head_dim wide, a value head v_head_dim; kv_heads = heads.
  std::uint64_t kv_lora_rank = 0;  // 0: standard attention (every field below unused)
  std::uint64_t q_lora_rank = 0;
  std::uint64_t rope_head_dim = 0;
  std::uint64_t v_head_dim = 0;    // 0: head_dim (every model but MLA)
  std::string source;

  bool is_moe() const { return experts > 0; }
  bool is_mla() const { return kv_lora_rank > 0; }
  // Layers with experts: all of them, less DeepSeek's dense first layers; 0 for a dense model.
  std::uint64_t moe_layers() const { return is_moe() ? layers - dense_layers : 0; }
  // The MLP width of a dense layer: ffn, or DeepSeek's dense_ffn before its MoE layers.
  std::uint64_t dense_mlp_width() const { return dense_ffn > 0 ? dense_ffn : ffn; }

  std::uint64_t v_dim() const { return v_head_dim > 0 ? v_head_dim : head_dim; }
  std::uint64_t q_width() const { return heads * head_dim; }        // (h) for standard attention
  std::uint64_t kv_width() const { return kv_heads * head_dim; }    // the keys: (kv_heads * head_dim)
  std::uint64_t v_width() const { return kv_heads * v_dim(); }      // the values
  std::uint64_t qkv_width() const { return q_width() + kv_width() + v_width(); }
  std::uint64_t out_width() const { return heads * v_dim(); }       // the attention output, o_proj's input

  // Whether 0-based layer `layer` attends through the sliding window (HF Gemma2: layers 0, 2, 4, ... slide).
  bool layer_slides(std::uint64_t layer) const {
    if (sliding_window_tokens == 0) return false;
    return sliding_window_global_every == 0 || layer % sliding_window_global_every != sliding_window_global_every - 1;
  }
  std::uint64_t sliding_layers() const;  // how many of the `layers` slide

  friend bool operator==(const model_spec&, const model_spec&) = default;
};

// Rejects shapes no model can have: zero sizes, heads that do not divide the hidden size (when head_dim
// was derived), kv_heads that do not divide heads, Gemma 2 features outside the llama family, negative or
// non-finite soft caps. Throws input_error naming the field.
void validate_model(const model_spec& m);

}  // namespace trainplan
