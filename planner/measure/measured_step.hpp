#pragma once
// A step timed on a GPU (`plan bench --backend cuda`) against the planner's FLOPs for the same run: the rates
// the measured time gives, as the planner's own are defined (planner/time/step_time.hpp) for one GPU.
#include "planner/evaluate/plan.hpp"

namespace trainplan {

struct measured_rates {
  double tokens_per_second = 0;  // the step's tokens / the measured step
  double mfu = 0;                // model FLOPs / (the measured step x the dense peak of the compute dtype)
  double hfu = 0;                // hardware FLOPs (recomputation included) likewise
};

measured_rates rates_of_measured_step(const plan_result& plan, double step_seconds);

}  // namespace trainplan
