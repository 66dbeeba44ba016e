#pragma once
// "What would make it fit": the fewest changes to a run that bring its peak under the GPU's memory.
#include <cstddef>
#include <string>
#include <vector>

#include "planner/plan.hpp"

namespace trainplan {

struct fit_suggestion {
  std::vector<std::string> changes;  // "--recompute selective", "--micro-batch 2 --grad-accum 8"
  run_config run;                    // the changed run
  std::uint64_t peak_bytes = 0;
  std::int64_t headroom_bytes = 0;
  double tokens_per_second = 0;
  bool changes_training = false;     // a different optimizer, precision or LoRA changes the numerics
  std::uint64_t gpus = 1;            // GPUs the suggestion needs
};

// Tries single changes first, then pairs, then triples, along these axes: recomputation (selective,
// full), flash attention, a smaller micro-batch with more accumulation (same global batch), a lighter
// precision layout (bf16-mixed instead of fp32/autocast, no fp32 gradient buffer), a lighter optimizer
// (adamw-8bit, adafactor, lion), optimizer offload to CPU memory, LoRA or QLoRA adapters; and, on their
// own, the fewest GPUs of the same kind that fit with ZeRO-3, -2 or -1. Fitting candidates are ranked by
// number of changes, then by whether they change the training numerics, then by GPUs needed (fewest
// first), then by predicted tokens/s. Returns at most `max_results`.
std::vector<fit_suggestion> suggest_fits(const model_spec& model, const run_config& run, const gpu_spec& gpu,
                                         const calibration& calib, std::size_t max_results = 5);

}  // namespace trainplan
