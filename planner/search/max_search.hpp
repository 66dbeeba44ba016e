#pragma once
// `plan max seq|micro-batch|params`: the longest sequence, the largest micro-batch or the largest model (a
// derived llama-family shape) that fits a GPU with everything else fixed; and, with levers, what each
// combination of them reaches, as a ladder (planner/search/lever_ladder.hpp). The bisection and the looks
// around its boundary are planner/search/max_fit.hpp's; the verdict at each value is the search's
// (summarize_config: where the allocator is replayed, the replay's).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "planner/search/lever_ladder.hpp"
#include "planner/search/sweep.hpp"

namespace trainplan {

enum class max_quantity { seq, micro_batch, params };

struct max_question {
  max_quantity what = max_quantity::seq;
  sweep_model model;  // params: any shape; the search replaces it with the derived ones it tries
  run_config run;
  sweep_gpu gpu;
  double margin = 0;  // memory kept free, a fraction of the GPU, in [0, 1)
  // micro_batch with --global-batch: each data-parallel GPU's share of the global batch (micro-batch x
  // accumulation) stays, so only the micro-batches that divide it are candidates, the accumulation making up
  // the rest.
  bool keep_global_batch = false;
};

// Sequences are probed around the boundary on multiples of this: the lengths people train at.
inline constexpr std::uint64_t max_seq_grid = 64;

// The largest value searched: 2^24; for a sequence the model's learned positions when it has a table of them;
// for a model 10T parameters (the search's unit: millions).
std::uint64_t max_search_limit(const max_question& q);

// A peak as `plan` gives it (where the allocator is replayed, the replay's least memory, not the estimate),
// against the budget.
struct max_peak {
  std::uint64_t peak_bytes = 0, budget_bytes = 0;
};

struct max_answer {
  // In the search's own steps: tokens, sequences, or millions of parameters of the derived shape's target.
  std::optional<std::uint64_t> best;
  // The step above best within the limit (with the global batch kept: the next dividing micro-batch).
  std::optional<std::uint64_t> next;
  // Values on the grid below best that do not fit (the allocator replay is not monotone), ascending; never
  // for a model's size.
  std::vector<std::uint64_t> misses_below;
  std::uint64_t value = 0;  // best in the answer's unit: the derived shape's parameters for params; 0 when none
  std::uint64_t limit = 0;  // max_search_limit
  std::uint64_t stride = 1;  // the grid of misses_below: max_seq_grid for sequences
  std::uint64_t budget_bytes = 0;  // the GPU's memory less the margin
  sweep_model model;  // at best: the derived shape for params (as given when nothing fits)
  run_config run;     // at best: its sequence, micro-batch and accumulation
  std::optional<max_peak> at_max;    // best's peak; set with best
  std::optional<max_peak> one_more;  // next's peak; unset when next cannot be evaluated
};

// Where the allocator is replayed the verdict is the replay's, which need not follow the quantity monotonically
// (planner/search/max_fit.hpp): after the bisection, the climb over every micro-batch, or for sequences every
// multiple of 64, above its boundary, and the smaller ones on that grid that do not fit. A model's size is
// searched as derived shapes, which change by whole layers and widths: bisection alone. With the global batch
// kept, every dividing micro-batch is tried from the top. Throws input_error when the configuration cannot
// exist even at the smallest value (an error in the options, not "nothing fits").
max_answer find_max(const max_question& q);

// The same question for every combination of `levers` (lever_bit bits; lever_space up to 8 GPUs), each
// combination reached as find_max reaches the answer (without naming what fails below it), so that a row's
// value is what find_max gives with the row's run; as a ladder of at most `top` rows. A combination that
// cannot run reaches nothing. Throws input_error for the batch lever in max micro-batch (the question itself)
// and for the seq lever.
std::vector<ladder_row> max_lever_ladder(const max_question& q, unsigned levers, std::size_t top);

}  // namespace trainplan
