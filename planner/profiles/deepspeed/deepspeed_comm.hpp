#pragma once
// The collectives of one DeepSpeed ZeRO step on one rank under Hugging Face's Trainer (the buffers and "auto"
// sizes of deepspeed_state.hpp): stage 1 reduces the accumulated gradients at the boundary, stage 2 in every
// micro-batch's backward as its buckets fill, both all-gather the updated 16-bit parameters after the step; stage 3
// gathers each module's parameters before its forward and its backward and reduce-scatters its gradients.
#include "planner/model/model_facts.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"
#include "planner/time/communication.hpp"

namespace trainplan {

step_comm deepspeed_communication(const model_spec& m, const run_config& run, const precision_layout& layout,
                                  const model_facts& facts);

}  // namespace trainplan
