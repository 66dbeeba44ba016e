#pragma once
// Plans and inventories the planner tests build from a model and a run, with the run's own precision
// layout, on the catalog's H100.
#include "planner/profiles/registry.hpp"
#include "planner/evaluate/plan.hpp"
#include "planner/run/precision.hpp"
#include "tests/support/test_helpers.hpp"

namespace trainplan::test {

inline inventory inventory_of(const model_spec& m, const run_config& r) {
  return build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype));
}

inline plan_result plan_of(const model_spec& m, const run_config& r) {
  const gpu_spec& h100 = data().gpu("h100");
  return evaluate_plan(m, r, h100, data().calibration_for(h100));
}

}  // namespace trainplan::test
