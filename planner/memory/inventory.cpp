// The inventory's few functions (inventory.hpp): category names, a per-layer buffer's instance name, and
// finish_inventory's layer counts and per-layer activation totals.
#include "planner/memory/inventory.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "planner/util/checked_math.hpp"

namespace trainplan {

std::string_view category_name(tensor_category c) {
  switch (c) {
    case tensor_category::weights: return "weights";
    case tensor_category::master_weights: return "master_weights";
    case tensor_category::gradients: return "gradients";
    case tensor_category::optimizer: return "optimizer";
    case tensor_category::activations: return "activations";
    case tensor_category::logits: return "logits";
    case tensor_category::activation_grads: return "activation_grads";
  }
  return "?";
}

std::string tensor_spec::instance_name(std::uint64_t layer) const {
  if (!per_layer) return std::string(name);
  std::string out(name);
  auto pos = out.find("{}");
  if (pos != std::string::npos) out.replace(pos, 2, std::to_string(layer));
  return out;
}

inventory finish_inventory(inventory out, const model_spec& m) {
  out.layers = m.layers;
  out.dense_layers = m.is_moe() ? m.dense_layers : 0;
  out.events_per_micro_batch = 2 * static_cast<std::int64_t>(m.layers) + 5;
  // One layer's: the last layer's (an MoE layer, when DeepSeek's dense first layers differ from it).
  const std::uint32_t last_layer = static_cast<std::uint32_t>(m.layers - 1);
  for (const tensor_spec& t : out.tensors)
    if (t.per_layer && t.kept_to_backward && t.category == tensor_category::activations) {
      if (t.layer_begin <= last_layer && last_layer < t.layer_end)
        out.activations_per_layer_bytes = checked_add(out.activations_per_layer_bytes, t.bytes, "activation bytes");
      out.activations_all_layers_bytes =
          checked_add(out.activations_all_layers_bytes, checked_mul(t.bytes, t.instances(), "activation bytes"), "activation bytes");
    }
  return out;
}


}  // namespace trainplan
