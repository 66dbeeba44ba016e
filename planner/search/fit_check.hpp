#pragma once
// The fit check (`plan` with a model and a run): the run evaluated in detail, what its report says beside the
// numbers (the allocator replay's details, whether the fit is tight, the time to train a token budget), and
// when it does not fit, what would make it fit (planner/search/suggest.hpp). A report renders this; it computes
// nothing of its own.
#include <cstdint>
#include <optional>
#include <vector>

#include "planner/evaluate/plan.hpp"
#include "planner/search/suggest.hpp"

namespace trainplan {

// A token budget (--tokens) at the plan's speed.
struct training_time {
  double tokens = 0;
  double seconds = 0;      // tokens / tokens per second
  std::uint64_t steps = 0;  // optimizer steps, the last one partial: ceil(tokens / tokens per step of every GPU)
};
training_time time_to_train(const plan_result& plan, double tokens);

struct fit_check {
  plan_result plan;  // with add_allocator_details
  bool tight = false;  // fits, with less headroom than the calibration's safety margin (tight_fit)
  // Model state alone needs more than half the GPU: what to shard or leave out is the advice where nothing fits.
  bool model_state_fills_gpu = false;
  std::vector<fit_suggestion> suggestions;  // when it does not fit
  // When no suggestion keeps the numerics on this hardware (the first costs something): the lowest peak such a
  // change reaches (same_numerics_floor).
  std::optional<std::uint64_t> same_numerics_floor_bytes;
  std::optional<training_time> training;  // with train_tokens
};

// The plan and what its report says beside it; `train_tokens` (--tokens): the time to train them. Throws
// input_error for a configuration that cannot run (evaluate_plan).
fit_check check_fit(const model_spec& model, const run_config& run, const gpu_spec& gpu, const calibration& calib,
                    std::optional<double> train_tokens = std::nullopt);

// Where the plan does not fit: the suggestions (none with options.max_results 0), and the same-numerics floor
// where the first of them costs something. The run as check_fit took it.
void add_suggestions(fit_check& check, const model_spec& model, const run_config& run, const gpu_spec& gpu,
                     const calibration& calib, const suggest_options& options);

}  // namespace trainplan
