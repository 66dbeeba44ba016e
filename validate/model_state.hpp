#pragma once
// The model's parameters and everything kept per parameter, each one flat buffer of P elements named as
// the planner names it (weights.bf16, master.fp32, grads.bf16, grads.fp32, adam.m, adam.v), with every
// parameter tensor a slot in it (llm.c's layout). Gradients and Adam state are allocated when first needed.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "planner/model/model_spec.hpp"
#include "planner/run/precision.hpp"
#include "validate/tracking_allocator.hpp"

namespace trainplan::validate {

struct param_slot {
  std::uint64_t offset = 0, count = 0;
};

class model_state {
 public:
  // Allocates the weights (and the master copy) and fills them from `seed` (see init_value). The vocabulary
  // tables (the token embedding, an untied head) hold `vocab_rows` rows, at least m.vocab: the rows past
  // m.vocab are llm.c's padding (planner/model/param_count.hpp vocab_rows) and start, and stay, zero.
  model_state(const model_spec& m, std::uint64_t vocab_rows, const precision_layout& layout, tracking_allocator& alloc,
              std::uint64_t seed);

  std::uint64_t params() const { return params_; }
  bool has(const std::string& name) const { return slots_.count(name) > 0; }
  // name is the planner's parameter name with the layer filled in: "layer3.attn.qkv.weight".
  kernels::view weight(const std::string& name) const { return slot_view(weights, name); }
  kernels::view grad(const std::string& name) const { return slot_view(grads, name); }

  void ensure_grads();  // first backward of a step: grads (and the fp32 accumulation buffer), zeroed
  void ensure_optimizer_state();  // first optimizer step: adam.m, adam.v
  void release_grads();  // end of the optimizer step: zero_grad(set_to_none=True)

  // The deterministic initial value of element i of parameter `name` (also used by the PyTorch script):
  // matrices and embeddings 0.02 * u with u uniform of unit variance from (seed, parameter index, i);
  // norm weights 1; biases 0.
  static float init_value(std::uint64_t seed, std::size_t param_index, const std::string& name, std::uint64_t i);

  const precision_layout& layout;
  tensor weights, master, grads, grads_accum, adam_m, adam_v;

 private:
  kernels::view slot_view(const tensor& t, const std::string& name) const;
  tracking_allocator& alloc_;
  std::map<std::string, param_slot> slots_;
  std::uint64_t params_ = 0;
};

}  // namespace trainplan::validate
