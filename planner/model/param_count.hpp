#pragma once
// Exact parameter counts from a model's shape, tensor by tensor.
#include <cstdint>
#include <string>
#include <vector>

#include "planner/model/model_spec.hpp"

namespace trainplan {

// Which layers hold a per-layer tensor: every layer, or (DeepSeek-V3, model_spec::dense_layers) only the
// dense first layers or only the MoE layers after them.
enum class layer_set { all, dense, moe };

// What a parameter tensor is to the code that treats some tensors apart (the vocabulary tables that a stack pads,
// a pipeline stage's embedding and head, the q, k, v that PyTorch holds as separate tensors).
enum class param_role {
  layer,               // any other tensor of a transformer layer
  layer_qkv_weight,    // a layer's q, k, v projection (one tensor here; q_proj, k_proj, v_proj in a Llama)
  layer_qkv_bias,      // its bias (Qwen2, GPT-2)
  token_embedding,     // the [V, h] token table
  position_embedding,  // GPT-2's learned position table
  final_norm,          // the final norm's weight and bias
  head,                // an untied output projection, [V, h]
};

struct param_tensor {
  std::string name;                 // "embed.tokens", "layer{}.attn.qkv.weight", "lm_head.weight"...
  std::vector<std::uint64_t> shape; // e.g. (3h, h) for the GPT qkv projection
  std::uint64_t count = 0;          // product of shape
  bool per_layer = false;           // one copy in each of the L layers
  bool matmul = false;              // a weight a GEMM multiplies by (enters the 6N FLOPs rule)
  std::uint64_t active = 0;         // of count, what one token uses: count, or top-k of the experts
  bool routed_expert = false;       // a stack of routed experts' weights (what expert parallelism divides)
  layer_set in_layers = layer_set::all;
  param_role role = param_role::layer;
  bool embedding() const { return role == param_role::token_embedding || role == param_role::position_embedding; }
  bool vocabulary_table() const { return role == param_role::token_embedding || role == param_role::head; }
};

// How many layers a model (or a pipeline stage) has, and how many of them are DeepSeek's dense first layers:
// what a per-layer tensor is multiplied by.
struct layer_counts {
  std::uint64_t all = 0;
  std::uint64_t dense = 0;  // of all; with experts, the dense layers before the MoE ones

  layer_counts() = default;
  explicit layer_counts(std::uint64_t all_layers, std::uint64_t dense_layers = 0) : all(all_layers), dense(dense_layers) {}
  explicit layer_counts(const model_spec& m) : all(m.layers), dense(m.dense_layers) {}
  std::uint64_t of(layer_set s) const { return s == layer_set::all ? all : s == layer_set::dense ? dense : all - dense; }
  std::uint64_t instances(const param_tensor& p) const { return p.per_layer ? of(p.in_layers) : 1; }
  // Which tensors a buffer over layers [begin, end) stands for: a range within the dense first layers
  // holds the `all` and `dense` tensors, one after them the `all` and `moe` ones.
  bool holds(const param_tensor& p, std::uint64_t begin, std::uint64_t end) const {
    if (!p.per_layer || p.in_layers == layer_set::all) return true;
    return p.in_layers == layer_set::dense ? end <= dense : begin >= dense;
  }
};

struct param_counts {
  std::uint64_t total = 0;          // every trainable parameter, counted once (tied embeddings once)
  std::uint64_t embedding = 0;      // token (+ position) embeddings
  std::uint64_t per_layer = 0;      // one transformer layer (with DeepSeek's dense first layers: an MoE layer)
  std::uint64_t per_dense_layer = 0;  // one of DeepSeek's dense first layers; 0 without them
  std::uint64_t layers_total = 0;   // every layer: L * per_layer, or the dense and MoE layers' sums
  std::uint64_t final_norm = 0;
  std::uint64_t lm_head = 0;        // 0 when tied
  std::uint64_t matmul = 0;         // weights used in GEMMs per forward, the tied head counted as a GEMM
  std::uint64_t matmul_per_layer = 0;         // of per_layer (an MoE layer's with dense first layers)
  std::uint64_t matmul_per_dense_layer = 0;   // of per_dense_layer
  std::uint64_t matmul_layers_total = 0;      // every layer's GEMM weights
  std::uint64_t approx_12lh2_vh = 0;  // the seeds' estimate 12*L*h^2 + V*h (Ultra-scale Playbook)
  // What one token uses: every parameter of a dense model; with experts, top-k of each layer's experts.
  std::uint64_t active = 0;
  std::uint64_t active_matmul = 0;            // GEMM weights one token's forward multiplies by, head included
  std::uint64_t active_matmul_layers_total = 0;  // GEMM weights one token's forward multiplies by in the layers
  std::uint64_t routed_experts = 0;           // the routed experts' weights, all layers (what --ep divides)
  std::uint64_t routed_experts_per_layer = 0; // of one MoE layer
};

// Tensors in model order; per-layer tensors are listed once with per_layer = true.
std::vector<param_tensor> param_tensors(const model_spec& m);

param_counts count_params(const model_spec& m);

// The rows a stack's vocabulary tables (the token embedding, an untied head) and its logits hold: the
// vocabulary rounded up to a multiple of `pad_multiple` (1: not padded). llm.c pads to a multiple of 128
// (train_gpt2.cu: padded_vocab_size, 50257 -> 50304) so that the logits' rows and the head's three GEMMs are
// aligned for cuBLAS. The padded rows are zero, receive no gradient and never enter the loss: m.vocab stays
// the number of classes.
std::uint64_t vocab_rows(const model_spec& m, std::uint64_t pad_multiple);
// m with `rows` table rows (vocab_rows): only for what allocates or counts the stored parameter tensors
// (validate/model_state); the class count stays m.vocab.
model_spec with_vocab_rows(const model_spec& m, std::uint64_t rows);

}  // namespace trainplan
