// The PyTorch tensors each buffer stands for (tensor_pieces.hpp).
#include "planner/allocator/tensor_pieces.hpp"

#include <algorithm>

#include "planner/run/lora.hpp"

namespace trainplan {

std::vector<std::uint64_t> split_by_parameters(const tensor_spec& t, const model_facts& facts, const inventory& inv,
                                               std::vector<std::string_view>* names) {
  const std::uint64_t width = dtype_bytes(t.type);
  if (t.allocations > 1 && t.scope == param_scope::none && t.bytes % t.allocations == 0)
    return std::vector<std::uint64_t>(t.allocations, t.bytes / t.allocations);  // peft's per-module copies
  std::vector<std::uint64_t> sizes;
  // One parameter's tensors: Llama's q, k and v (weights, and Qwen2's biases) are separate PyTorch tensors
  // where the planner's list holds them as one (model_facts::qkv_pieces).
  auto push = [&](const param_tensor& p) {
    const std::vector<std::uint64_t>* pieces = p.role == param_role::layer_qkv_weight ? &facts.qkv_pieces
                                               : p.role == param_role::layer_qkv_bias ? &facts.qkv_bias_pieces
                                                                                  : nullptr;
    if (pieces && !pieces->empty())
      for (std::uint64_t e : *pieces) sizes.push_back(e * width);
    else
      sizes.push_back(p.count * width);
    if (names) names->resize(sizes.size(), p.name);
  };
  auto take = [&](auto keep, std::uint64_t copies) {
    for (const param_tensor& p : facts.tensors)
      if (keep(p))
        for (std::uint64_t c = 0; c < copies; ++c) push(p);
  };
  auto in_range = [&](const param_tensor& p) { return facts.layers.holds(p, t.layer_begin, t.layer_end); };
  switch (t.scope) {
    case param_scope::none: break;
    case param_scope::all:
      // In PyTorch's order (model.parameters()): the tensors before the layers, then layer by layer, then
      // those after (the planner lists a layer's tensors once).
      for (std::size_t i = 0; i < facts.tensors.size();) {
        if (!facts.tensors[i].per_layer) {
          push(facts.tensors[i++]);
          continue;
        }
        std::size_t end = i;
        while (end < facts.tensors.size() && facts.tensors[end].per_layer) ++end;
        for (std::uint64_t layer = 0; layer < facts.layers.all; ++layer)
          for (std::size_t k = i; k < end; ++k)
            if (facts.layers.holds(facts.tensors[k], layer, layer + 1)) push(facts.tensors[k]);
        i = end;
      }
      break;
    case param_scope::layer: take([&](const param_tensor& p) { return p.per_layer && in_range(p); }, 1); break;
    case param_scope::layer_matmul: take([&](const param_tensor& p) { return p.per_layer && p.matmul && in_range(p); }, 1); break;
    case param_scope::layer_matmul_qkv:
    case param_scope::layer_matmul_after_qkv: {
      const bool qkv = t.scope == param_scope::layer_matmul_qkv;
      take([&](const param_tensor& p) { return p.per_layer && p.matmul && in_range(p) && (p.role == param_role::layer_qkv_weight) == qkv; }, 1);
      break;
    }
    case param_scope::head: {
      const bool tied = std::none_of(facts.tensors.begin(), facts.tensors.end(),
                                     [](const param_tensor& p) { return p.role == param_role::head; });
      take([tied](const param_tensor& p) {
        return p.role == param_role::final_norm || p.role == param_role::head || (tied && p.embedding());
      }, 1);
      break;
    }
    case param_scope::embedding: take([](const param_tensor& p) { return p.embedding(); }, 1); break;
    case param_scope::adapters:  // every layer's lora_A and lora_B of each adapted module, in model order
      for (std::uint64_t layer = 0; layer < inv.layers; ++layer)
        for (std::uint64_t elements : inv.adapter_layer_tensors) sizes.push_back(elements * width);
      break;
    case param_scope::layer_adapters:
      for (std::uint64_t elements : inv.adapter_layer_tensors) sizes.push_back(elements * width);
      break;
    case param_scope::layer_adapters_qkv_a:  // lora_A of each q, k, v module: tensors 0, 2, ... of the layer's list
    case param_scope::layer_adapters_rest:
      for (std::size_t i = 0; i < inv.adapter_layer_tensors.size(); ++i) {
        const bool qkv_a = lora_is_qkv_a(i, inv.adapter_qkv_modules);
        if (qkv_a == (t.scope == param_scope::layer_adapters_qkv_a)) sizes.push_back(inv.adapter_layer_tensors[i] * width);
      }
      break;
  }
  std::uint64_t sum = 0;
  for (std::uint64_t s : sizes) sum += s;
  const bool split = !sizes.empty() && sum == t.bytes;
  if (names && (!split || names->size() != sizes.size())) names->clear();  // one allocation, or no parameters
  return split ? sizes : std::vector<std::uint64_t>{t.bytes};
}

// torch.optim's _init_group creates one parameter's states together (AdamW: exp_avg, then exp_avg_sq) before
// the next parameter's, at the first optimizer step: GPT-2's recorded allocator history shows the pairs, in
// module order. The inventory lists each state as one buffer over every parameter; here the first state's
// instance makes all their per-parameter allocations, parameter by parameter, and the others make none (their
// lifetime is the same: from the first step on, never freed). States that are one allocation (sharded, or a
// non-PyTorch layout) are left as they are.
void interleave_optimizer_states(allocator_schedule& schedule, const inventory& inv) {
  std::vector<std::uint32_t> group;
  for (std::uint32_t i = 0; i < inv.tensors.size(); ++i) {
    const tensor_spec& t = inv.tensors[i];
    if (t.role == tensor_role::optimizer_state && t.lifetime == state_lifetime::from_first_optimizer &&
        schedule.sizes[i].size() > 1 && (group.empty() || schedule.sizes[i].size() == schedule.sizes[group[0]].size()))
      group.push_back(i);
  }
  if (group.size() < 2) return;
  const std::size_t n = schedule.sizes[group[0]].size();
  std::vector<std::uint64_t> together;
  together.reserve(n * group.size());
  for (std::size_t p = 0; p < n; ++p)
    for (std::uint32_t i : group) together.push_back(schedule.sizes[i][p]);
  schedule.sizes[group[0]] = std::move(together);
  for (std::size_t k = 1; k < group.size(); ++k) schedule.sizes[group[k]].assign(1, 0);  // a zero-byte request: none
}

}  // namespace trainplan
