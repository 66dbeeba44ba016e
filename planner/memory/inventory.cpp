#include "planner/memory/inventory.hpp"

#include <fmt/format.h>

#include <algorithm>


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

}  // namespace trainplan
