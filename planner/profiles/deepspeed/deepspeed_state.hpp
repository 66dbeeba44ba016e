#pragma once
// The per-rank memory of DeepSpeed's ZeRO optimizers (stages 1, 2 and 3) under Hugging Face's Trainer, bf16 (or
// fp16) mode: the engine casts the model to 16 bits and keeps an fp32 master partition; the buffer sizes are the
// "auto" values transformers fills (reduce_bucket_size = h^2, stage3_prefetch_bucket_size = 0.9 h^2,
// stage3_param_persistence_threshold = 10 h) and the rest DeepSpeed's defaults, with overlap_comm as
// transformers' example configs set it (stages 2 and 3). Sources: deepspeed/runtime/zero/stage_1_and_2.py
// (DeepSpeedZeroOptimizer), stage3.py (DeepSpeedZeroOptimizer_Stage3), partitioned_param_coordinator.py,
// config.py; transformers' integrations/deepspeed.py (HfTrainerDeepSpeedConfig).
#include <cstdint>

#include "planner/memory/inventory.hpp"
#include "planner/model/model_facts.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"

namespace trainplan {

// The ZeRO configuration a Trainer run gets, resolved for the model (elements, not bytes).
struct deepspeed_buckets {
  std::uint64_t reduce_bucket = 0;       // reduce_bucket_size: "auto" = h^2
  std::uint64_t prefetch_bucket = 0;     // stage3_prefetch_bucket_size: "auto" = 0.9 h^2
  std::uint64_t persistence = 0;         // stage3_param_persistence_threshold: "auto" = 10 h
  std::uint64_t max_reuse_distance = 1'000'000'000;  // stage3_max_reuse_distance (DeepSpeed's default)
  std::uint64_t sub_group = 1'000'000'000;           // sub_group_size (DeepSpeed's default)
  bool overlap_comm = false;             // two IPG buffers in stages 1 and 2 when on
};
deepspeed_buckets deepspeed_buckets_for(const model_spec& m, int stage);

// How many of the last layers ZeRO-3 keeps gathered from their forward to their backward: a module's
// parameters are released after its forward unless they are needed again within max_reuse_distance elements of
// the module trace (PartitionedParameterCoordinator.__params_to_release). After layer L-1-i's forward the trace
// runs through the forward of the i layers after it and the head, the head's backward, and those i layers'
// backward before its own: 2 i P_layer + 2 P_head elements.
std::uint64_t zero3_layers_kept(std::uint64_t layers, std::uint64_t layer_elements, std::uint64_t head_elements,
                                std::uint64_t max_reuse_distance);

// Adds DeepSpeed's per-rank model state and buffers for run.zero (1, 2 or 3) to `out`.
void add_deepspeed_state(inventory& out, const model_spec& m, const run_config& run, const precision_layout& layout,
                         const model_facts& facts);

}  // namespace trainplan
