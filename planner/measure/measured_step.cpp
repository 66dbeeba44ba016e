// The rates of a step timed on a GPU (measured_step.hpp): tokens/s, MFU and HFU from the planner's FLOPs for
// the same run and the measured time.
#include "planner/measure/measured_step.hpp"

namespace trainplan {

measured_rates rates_of_measured_step(const plan_result& plan, double step_seconds) {
  const double peak = plan.time.peak_flops_per_s;
  return {plan.flops.tokens_per_step / step_seconds, plan.flops.model_per_step / (step_seconds * peak),
          plan.flops.hardware_per_step / (step_seconds * peak)};
}

}  // namespace trainplan
