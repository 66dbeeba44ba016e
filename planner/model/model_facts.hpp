#pragma once
// What a training stack needs to know of a model's parameters, computed once per model: its parameter
// tensors, their counts, how many tensors PyTorch holds, and (Llama-like Hugging Face models) the pieces of
// the attention's q, k and v.
#include <cstdint>
#include <vector>

#include "planner/model/model_spec.hpp"
#include "planner/model/param_count.hpp"

namespace trainplan {

// What depends on the model alone, computed once per model (a sweep evaluates many runs of one model).
struct model_facts {
  std::vector<param_tensor> tensors;
  param_counts counts;
  // Parameter tensors PyTorch holds (a per-layer tensor once per layer): what a foreach optimizer walks.
  std::uint64_t tensor_instances = 0;
  layer_counts layers;  // the layers the facts describe, and how many are dense first layers
  // Where PyTorch holds q, k and v as separate tensors but the list above holds one layer{}.attn.qkv tensor
  // (Hugging Face Llama-like models without fused projections): the elements of each, for the allocator
  // replay; empty where they are one tensor (GPT-2's c_attn, Phi-3's qkv_proj) or other (MLA).
  std::vector<std::uint64_t> qkv_pieces, qkv_bias_pieces;
};
model_facts describe_model(const model_spec& m);
std::uint64_t count_tensor_instances(const std::vector<param_tensor>& tensors, const layer_counts& layers);

}  // namespace trainplan
