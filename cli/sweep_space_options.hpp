#pragma once
// Turns `plan`'s options, where each may now be a list or a range, into a sweep space. Shared by
// `plan sweep`, `plan search`, `plan max` and `plan plot`.
#include "cli/model_run_options.hpp"
#include "planner/search/sweep.hpp"

namespace trainplan::cli {

// Model axis: a list in --model, --params or --hf-config (shape overrides apply to each); GPU axis:
// --gpu list; run axes: every run option. Throws input_error naming the option.
sweep_space resolve_sweep_space(const model_run_args& args, std::vector<std::string>* notes = nullptr);

}  // namespace trainplan::cli
