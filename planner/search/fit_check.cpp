// The fit check (fit_check.hpp): the run evaluated in detail, the time to train a token budget, and the
// suggestions added when it does not fit.
#include "planner/search/fit_check.hpp"

#include <cmath>

#include "planner/model/model_facts.hpp"
#include "planner/search/search.hpp"

namespace trainplan {

training_time time_to_train(const plan_result& plan, double tokens) {
  training_time t;
  t.tokens = tokens;
  t.seconds = tokens / plan.time.tokens_per_second;
  t.steps = static_cast<std::uint64_t>(std::ceil(tokens / (plan.flops.tokens_per_step * plan.run.data_parallel())));
  return t;
}

fit_check check_fit(const model_spec& model, const run_config& run, const gpu_spec& gpu, const calibration& calib,
                    std::optional<double> train_tokens) {
  fit_check c;
  c.plan = evaluate_plan(model, run, gpu, calib);
  plan_result& p = c.plan;
  add_allocator_details(p, describe_model(p.model));
  c.tight = tight_fit(p);
  c.model_state_fills_gpu = 2 * p.model_state_bytes() > p.gpu.memory_bytes;
  if (train_tokens) c.training = time_to_train(p, *train_tokens);
  return c;
}

void add_suggestions(fit_check& check, const model_spec& model, const run_config& run, const gpu_spec& gpu,
                     const calibration& calib, const suggest_options& options) {
  if (check.plan.fits || options.max_results == 0) return;
  check.suggestions = suggest_fits(model, run, gpu, calib, options);
  if (!check.suggestions.empty() && check.suggestions.front().costs != cost_none)
    check.same_numerics_floor_bytes = same_numerics_floor(model, run, gpu, calib);
}

}  // namespace trainplan
