#pragma once
// The collectives of one FSDP2 step on one rank (torch.distributed.fsdp.fully_shard, torchtitan's wrapping: a unit
// per decoder layer, the embedding's, and the final norm with the head): per micro-batch, each unit's parameters
// all-gathered before its forward and, resharded after it, again before its backward; its gradients
// reduce-scattered after its backward.
#include "planner/model/model_facts.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"
#include "planner/time/communication.hpp"

namespace trainplan {

step_comm fsdp2_communication(const model_spec& m, const run_config& run, const precision_layout& layout,
                              const model_facts& facts);

}  // namespace trainplan
