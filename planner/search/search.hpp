#pragma once
// The configuration search: which runs fit (with a safety margin), ranked by predicted tokens/s for a
// target global batch, their Pareto front of peak memory against tokens/s, and, for the runs that do not
// fit, the component that breaks the budget. The fit check's suggestions use the same evaluation.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/search/levers.hpp"
#include "planner/evaluate/plan.hpp"
#include "planner/search/sweep.hpp"

namespace trainplan {

// What the search keeps of one evaluated configuration (a plan_result is far larger).
struct config_summary {
  const sweep_model* model = nullptr;
  const sweep_gpu* gpu = nullptr;
  run_config run;
  std::uint64_t peak_bytes = 0;
  std::uint64_t budget_bytes = 0;       // GPU memory x (1 - margin)
  bool fits = false;                    // peak <= budget
  // The tensors, the CUDA context and the workspaces: no allocator needs less. Unlike the verdict of the
  // allocator replay (replays_allocator), which depends on exact sizes, it grows with the micro-batch and the
  // sequence.
  std::uint64_t floor_bytes = 0;
  // Where the allocator is replayed (replays_allocator) but the replay was left out because the floor alone
  // passes the budget (replay_when::tensors_fit): the verdict is known (it does not fit), the peak is not plan's
  // yet. search_configs replays the rows whose peak it shows and leaves the others' peak at floor_bytes.
  bool peak_is_floor = false;
  double tokens_per_second = 0, mfu = 0, step_seconds = 0;
  std::uint64_t category_bytes[tensor_category_count] = {};
  std::uint64_t overhead_bytes = 0;
  tensor_category largest = tensor_category::activations;  // the biggest component at the peak
};

// The budget for a GPU: memory x (1 - margin), margin in [0, 1).
std::uint64_t memory_budget(const gpu_spec& gpu, double margin);

// A fit with less headroom than the calibration's safety margin (what plan search keeps free for what the
// model does not capture; 5% unless calibrated): the fit check still says it fits, and says it is tight, so
// that it and the search (which leaves such a run out) do not seem to disagree.
bool tight_peak(std::uint64_t peak_bytes, const gpu_spec& gpu, const calibration& calib);  // a peak that fits (a suggestion's)
bool tight_fit(const plan_result& r);

// When summarize_config replays the allocator (where replays_allocator): where it can change the verdict (the tensors
// fit the budget); always, so that the peak is plan's (the least memory the replay completes in), not the estimate; or
// never, for a bound (floor_bytes) before the verdict is needed.
enum class replay_when { tensors_fit, always, never };

// Evaluates one configuration; nullopt when it cannot run at all (input_error), with `why` set. The replay
// always gets the whole GPU, as in the fit check: the peak is the one `plan` reports, and the margin is kept
// free beyond it.
// With `programs`, replay programs (and their outcomes) shared with configurations summarised before whose
// allocator schedules are equal (planner/allocator/program_cache.hpp).
std::optional<config_summary> summarize_config(const sweep_model& model, const sweep_gpu& gpu, const run_config& run,
                                               double margin, std::string* why = nullptr,
                                               replay_when replay = replay_when::tensors_fit, program_cache* programs = nullptr);

struct search_result {
  std::vector<config_summary> fitting;  // best first: tokens/s, less recomputation, larger micro-batch, lower peak
  std::vector<config_summary> pareto;   // fitting runs no other beats on both peak and tokens/s, by peak
  // Over the budget. Each peak the listing shows is plan's (the least memory the allocator replay completes in,
  // where it is replayed): each component's smallest (list_search) and the closest to its budget
  // (ways_out_of_closest); a row whose peak could not be any of those keeps its floor (peak_is_floor).
  std::vector<config_summary> failing;
  std::uint64_t evaluated = 0, unreachable = 0, invalid = 0;  // unreachable: the target batch cannot be split
  std::string first_invalid_reason;     // why the first invalid configuration cannot run
  std::uint64_t programs_shared = 0;    // replays whose program an equal schedule had compiled (program_cache)
};

// Every point of `space`, with accumulation = target_tokens / (seq x micro-batch x data-parallel GPUs) (which must divide
// exactly; the space's own accumulation axis must be the default {1}), evaluated against the budget. The
// summaries point into `space`, which must outlive the result.
// `share_programs`: replay programs shared between configurations with equal schedules (the same rows, sooner;
// the tests turn it off to compare). On `threads` worker threads (0: every core; sweep_workers), the rows and
// their order the same on any number.
search_result search_configs(const sweep_space& space, std::uint64_t target_tokens_per_step, double margin,
                             bool share_programs = true, unsigned threads = 0);

// Widens `space` along `levers` (planner/search/levers.hpp): each lever's alternatives to the space's first
// configuration (the run as given) join the matching axes (precision and gradient dtype, optimizer and its
// implementation, recompute, attention, smaller micro-batches, adapters, offload, GPU count with ZeRO
// stage up to reach.max_gpus). The seq lever is not one: give --seq a list. Throws input_error for it.
void widen_by_levers(sweep_space& space, unsigned levers, const lever_reach& reach = {});

// True when a is at least as good as b on both axes and better on one (lower peak, higher tokens/s).
bool dominates(const config_summary& a, const config_summary& b);

}  // namespace trainplan
