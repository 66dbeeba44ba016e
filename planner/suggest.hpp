#pragma once
// "What would make it fit": the fewest changes to a run that bring its peak under the GPU's memory.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/plan.hpp"

namespace trainplan {

// What a suggestion costs the user, as a user would weigh it (issue 14).
enum suggestion_cost : unsigned {
  cost_none = 0,
  cost_numerics = 1,   // changes the numerics: precision, optimizer, adapters
  cost_hardware = 2,   // more GPUs
  cost_slower = 4,     // offload: the same numerics on the same GPU, at PCIe speed
};
std::string suggestion_cost_text(unsigned costs);  // "same numerics", "changes the numerics, more hardware"...

// The levers a user can put off limits with --keep: precision, optimizer, recompute, batch, attention,
// adapters, gpus, offload. Throws input_error for an unknown name.
unsigned parse_kept_levers(std::string_view list);
enum kept_lever : unsigned {
  keep_precision = 1, keep_optimizer = 2, keep_recompute = 4, keep_batch = 8, keep_attention = 16,
  keep_adapters = 32, keep_gpus = 64, keep_offload = 128,
};

struct fit_suggestion {
  std::vector<std::string> changes;  // "--recompute selective", "--micro-batch 2 --grad-accum 8"
  run_config run;                    // the changed run
  std::uint64_t peak_bytes = 0;
  std::int64_t headroom_bytes = 0;
  double tokens_per_second = 0;
  std::uint64_t gpus = 1;            // GPUs the suggestion needs
  unsigned costs = cost_none;        // suggestion_cost bits

  // A different optimizer, precision or LoRA changes the numerics.
  bool changes_training() const { return (costs & cost_numerics) != 0; }
};

// Tries single changes first, then pairs, then triples, along these levers: recomputation (selective,
// full), flash attention, a smaller micro-batch with more accumulation (same global batch), precision
// (pure bf16, bf16-mixed instead of fp32/autocast, fp8-mixed where the GPU has fp8, no fp32 gradient
// buffer), a lighter optimizer (adamw-8bit, adafactor, lion), optimizer offload to CPU memory, LoRA or
// QLoRA adapters; and, on their own, the fewest GPUs of the same kind that fit with ZeRO-3, -2 or -1.
// Levers in `kept` (kept_lever bits) are not touched. Ranking (issue 14): first what keeps the numerics
// and the hardware (at full speed, then slower: offload), then what changes the numerics, then what needs
// more GPUs; within each, the fewest changes, then the most tokens/s. A combination that
// contains a smaller fitting one is dropped. Returns at most `max_results`.
std::vector<fit_suggestion> suggest_fits(const model_spec& model, const run_config& run, const gpu_spec& gpu,
                                         const calibration& calib, std::size_t max_results = 5, unsigned kept = 0);

// The lowest peak any change that keeps the numerics and the hardware reaches: full recomputation, flash
// attention and micro-batch 1 (accumulation scaled to the same global batch). nullopt when that run
// cannot be evaluated.
std::optional<std::uint64_t> same_numerics_floor(const model_spec& model, const run_config& run, const gpu_spec& gpu,
                                                 const calibration& calib);

}  // namespace trainplan
