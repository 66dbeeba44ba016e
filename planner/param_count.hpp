#pragma once
// Exact parameter counts from a model's shape, tensor by tensor.
#include <cstdint>
#include <string>
#include <vector>

#include "planner/model_spec.hpp"

namespace trainplan {

struct param_tensor {
  std::string name;                 // "embed.tokens", "layer{}.attn.qkv.weight", "lm_head.weight"...
  std::vector<std::uint64_t> shape; // e.g. (3h, h) for the GPT qkv projection
  std::uint64_t count = 0;          // product of shape
  bool per_layer = false;           // one copy in each of the L layers
  bool matmul = false;              // a weight a GEMM multiplies by (enters the 6N FLOPs rule)
  std::uint64_t active = 0;         // of count, what one token uses: count, or top-k of the experts
  bool routed_expert = false;       // a stack of routed experts' weights (what expert parallelism divides)
};

struct param_counts {
  std::uint64_t total = 0;          // every trainable parameter, counted once (tied embeddings once)
  std::uint64_t embedding = 0;      // token (+ position) embeddings
  std::uint64_t per_layer = 0;      // one transformer layer
  std::uint64_t layers_total = 0;   // L * per_layer
  std::uint64_t final_norm = 0;
  std::uint64_t lm_head = 0;        // 0 when tied
  std::uint64_t matmul = 0;         // weights used in GEMMs per forward, the tied head counted as a GEMM
  std::uint64_t matmul_per_layer = 0;
  std::uint64_t approx_12lh2_vh = 0;  // the seeds' estimate 12*L*h^2 + V*h (Ultra-scale Playbook)
  // What one token uses: every parameter of a dense model; with experts, top-k of each layer's experts.
  std::uint64_t active = 0;
  std::uint64_t active_matmul = 0;            // GEMM weights one token's forward multiplies by, head included
  std::uint64_t active_matmul_per_layer = 0;
  std::uint64_t routed_experts = 0;           // the routed experts' weights, all layers (what --ep divides)
};

// Tensors in model order; per-layer tensors are listed once with per_layer = true.
std::vector<param_tensor> param_tensors(const model_spec& m);

param_counts count_params(const model_spec& m);

}  // namespace trainplan
