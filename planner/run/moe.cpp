// The rows a layer's experts process and the experts one GPU holds (moe.hpp): dropless or capacity-bound
// routing, divided by expert parallelism.
#include "planner/run/moe.hpp"

#include <cmath>

#include "planner/util/checked_math.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {

std::uint64_t routed_rows(const model_spec& m, const run_config& run) {
  if (!m.is_moe()) return 0;
  // This GPU's tokens: a context-parallel GPU routes its seq / cp of each sequence.
  const std::uint64_t assignments = checked_product({m.experts_per_token, run.micro_batch, run.seq_per_gpu()}, "routed tokens");
  if (run.capacity_factor <= 0.0) return assignments;
  const double per_expert = std::ceil(run.capacity_factor * static_cast<double>(assignments) / static_cast<double>(m.experts));
  if (!(per_expert < 1.8e19)) throw input_error("the expert capacity is beyond 64 bits");
  return checked_mul(m.experts, static_cast<std::uint64_t>(per_expert), "routed tokens");
}

std::uint64_t local_experts(const model_spec& m, const run_config& run) {
  return run.ep == 0 ? m.experts : m.experts / run.ep;
}

}  // namespace trainplan
