#pragma once
// Mixture of Experts: how many token rows a layer's experts process, and how expert parallelism divides
// the experts (model_spec::experts, run_config::ep and capacity_factor).
#include <cstdint>

#include "planner/model/model_spec.hpp"
#include "planner/run/run_config.hpp"

namespace trainplan {

// Rows the experts of one layer process for one micro-batch on one GPU, before expert parallelism moves
// them: dropless, every token goes to its top-k experts (k * b * s rows); with a capacity factor c, each of
// the E experts takes ceil(c * k * b * s / E) rows, padded when fewer arrive and dropped beyond (Fedus et
// al. 2022, Switch Transformers, Sec. 2.2; Lepikhin et al. 2021, GShard). 0 for a dense model.
std::uint64_t routed_rows(const model_spec& m, const run_config& run);

// The experts each GPU holds: experts / ep (validate_run checks that ep divides them).
std::uint64_t local_experts(const model_spec& m, const run_config& run);

}  // namespace trainplan
