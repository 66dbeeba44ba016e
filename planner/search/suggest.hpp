#pragma once
// "What would make it fit": the fewest changes to a run that bring its peak under the GPU's memory,
// along the levers of planner/search/levers.hpp, ranked the way a user would choose.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/search/levers.hpp"
#include "planner/evaluate/plan.hpp"

namespace trainplan {

struct fit_suggestion {
  std::vector<std::string> changes;  // "--recompute full", "--micro-batch 1 --grad-accum 8" (change_flags)
  run_config run;                    // the changed run
  std::uint64_t peak_bytes = 0;
  std::int64_t headroom_bytes = 0;
  double tokens_per_second = 0;
  bool tight = false;                // fits with less headroom than the safety margin (tight_peak)
  std::uint64_t gpus = 1;            // GPUs the suggestion needs
  unsigned levers = 0;               // lever_bit bits it pulls
  unsigned costs = cost_none;        // suggestion_cost bits

  // The same changes made roomy: plus every lever that keeps the numerics and lowers the peak (full
  // recomputation, fused AdamW, micro-batch 1, flash attention), only those that lower it. Pure bf16 with
  // full recomputation and fused AdamW is what most people run when 7B does not fit; the suggestion shows
  // the least that fits, this shows the most headroom the same numerics reach. nullopt when nothing
  // lowers the peak.
  struct variant {
    std::vector<std::string> added;  // the flags added to `changes`
    run_config run;
    std::uint64_t peak_bytes = 0;
    std::int64_t headroom_bytes = 0;
    bool tight = false;
    double tokens_per_second = 0;
  };
  std::optional<variant> roomiest;

  // A different optimizer, precision or LoRA changes the numerics.
  bool changes_training() const { return (costs & cost_numerics) != 0; }
};

struct suggest_options {
  std::size_t max_results = 5;
  unsigned kept_levers = 0;        // lever_bit bits not to touch (--keep)
  bool allow_shorter_seq = false;  // offer the longest sequence that fits (--allow-shorter-seq)
  // Offer LoRA and QLoRA adapters: for a fine-tuning run (--finetune given), not for pretraining, whose weights
  // must all train.
  bool offer_adapters = true;
};

// Tries single changes first, then pairs, then triples, along the single-GPU levers (recompute,
// attention, batch, precision, optimizer, and offload or adapters); on their own, the fewest GPUs of the
// same kind (powers of two up to 1024) that fit with ZeRO-3, -2 or -1; and, when allowed, the longest
// sequence that fits (rounded down to a multiple of 256 from 512 on). Ranking: cost_rank first (what
// keeps the numerics and the hardware, at full speed then slower; then what changes the numerics or the
// data; then more GPUs); within each, the fewest changes, then the fewest GPUs, then the most tokens/s.
// A combination that contains a smaller fitting one is dropped.
std::vector<fit_suggestion> suggest_fits(const model_spec& model, const run_config& run, const gpu_spec& gpu,
                                         const calibration& calib, const suggest_options& options = {});

// The lowest peak any change that keeps the numerics and the hardware reaches: full recomputation, flash
// attention and micro-batch 1 (accumulation scaled to the same global batch). nullopt when that run
// cannot be evaluated.
std::optional<std::uint64_t> same_numerics_floor(const model_spec& model, const run_config& run, const gpu_spec& gpu,
                                                 const calibration& calib);

}  // namespace trainplan
