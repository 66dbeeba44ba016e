// A model's facts computed once (model_facts.hpp): its parameter tensors and counts, the tensors PyTorch holds,
// and a Llama-style attention's separate q, k and v pieces.
#include "planner/model/model_facts.hpp"

#include "planner/util/checked_math.hpp"

namespace trainplan {

std::uint64_t count_tensor_instances(const std::vector<param_tensor>& tensors, const layer_counts& layers) {
  std::uint64_t n = 0;
  for (const param_tensor& t : tensors) n += layers.instances(t);
  return n;
}

model_facts describe_model(const model_spec& m) {
  model_facts f;
  f.tensors = param_tensors(m);
  f.counts = count_params(m);
  f.layers = layer_counts(m);
  f.tensor_instances = count_tensor_instances(f.tensors, f.layers);
  if (m.family == model_family::llama && !m.fused_projections && !m.is_mla()) {
    const std::uint64_t q = m.q_width(), kv = m.kv_width();
    f.qkv_pieces = {checked_mul(q, m.hidden, "parameter count"), checked_mul(kv, m.hidden, "parameter count"),
                    checked_mul(kv, m.hidden, "parameter count")};
    if (m.qkv_bias) f.qkv_bias_pieces = {q, kv, kv};
  }
  return f;
}

}  // namespace trainplan
