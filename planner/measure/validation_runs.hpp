#pragma once
// The runs `plan validate` measures: the GPU suite (--suite gpu), sized to the GPU by the planner's own
// verdicts, and what one run costs the CPU backend before it is started.
#include <cstdint>
#include <string>
#include <vector>

#include "planner/io/catalog.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/run/run_config.hpp"
#include "planner/system/calibration.hpp"
#include "planner/system/gpu_spec.hpp"

namespace trainplan {

struct validation_case {
  std::string label;
  model_spec model;
  run_config run;
  bool expect_fit = true;  // the planner's verdict: false for the one run it predicts not to fit
};

// The GPU validation suite: GPT-2 and TinyLlama across recomputation and attention kernels, accumulation,
// micro-batches and precisions; TinyLlama's sequences 2,048, 4,096 and the longest that fits with full
// recomputation, flash attention and the search's safety margin, up to 32,768; the largest micro-batch that
// fits within 95% of the GPU, and one more than the largest that fits the whole GPU (predicted not to fit).
std::vector<validation_case> gpu_validation_suite(const catalog& data, const gpu_spec& gpu, const calibration& calib);

// What a run of `steps` training steps asks of a backend: its tensor bytes at the peak (the run's stack's
// inventory, walked) and its hardware FLOPs.
struct validation_cost {
  std::uint64_t tensor_peak_bytes = 0;
  double hardware_flops = 0;
};
validation_cost validation_run_cost(const model_spec& model, const run_config& run, std::uint64_t steps);

}  // namespace trainplan
