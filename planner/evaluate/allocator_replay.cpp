// The allocator replay of a plan (plan.hpp: replays_allocator, apply_allocator_replay and what the report says
// beside it): PyTorch's caching allocator replayed over the plan's inventory, and where it runs short, the
// bisection for the least memory in which it completes; programs and outcomes shared where the caller keeps them.
#include <algorithm>

#include "planner/allocator/allocator_trace.hpp"
#include "planner/allocator/caching_allocator.hpp"
#include "planner/allocator/known_replays.hpp"
#include "planner/allocator/program_cache.hpp"
#include "planner/allocator/replay_program.hpp"
#include "planner/evaluate/plan.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/util/checked_math.hpp"

namespace trainplan {

bool replays_allocator(const run_config& run) {
  return profile_of(run).allocator == allocator_model::pytorch_replay && run.pp == 1;
}

std::uint64_t hf_loss_segment_bytes(const model_spec& m, const run_config& run) {
  const std::uint64_t rows = checked_mul(run.micro_batch, run.seq, "loss rows");
  const std::uint64_t bytes = checked_mul(checked_mul(rows, m.vocab, "loss elements"), dtype_bytes(dtype::fp32), "loss bytes");
  return caching_allocator::segment_size(caching_allocator::round_size(bytes));
}

bool confirm_with_allocator_replay(plan_result& r, const model_facts& facts, std::uint64_t budget_bytes,
                                   program_cache* programs) {
  const std::uint64_t fixed = r.overhead.fixed_bytes();  // each below 2^50
  if (!replays_allocator(r.run) || r.tensor_peak_bytes > budget_bytes || fixed > budget_bytes - r.tensor_peak_bytes)
    return false;
  apply_allocator_replay(r, facts, budget_bytes, nullptr, programs);
  return true;
}

namespace {

constexpr std::uint64_t allocator_capacity_step_bytes = 2ull << 20;

// A program's replays, each made or, where an equal replay was made before (one in a capacity that makes the
// same choices: known_replays.hpp), recalled. A recalled replay's reserved path is the earlier one's where it kept
// one, else empty (the path only lets probes resume: least_completing_capacity).
struct program_replays {
  const replay_program& program;
  known_replays* known = nullptr;  // null: every replay is made
  program_cache* cache = nullptr;  // counts what `known` keeps against its bound

  allocator_replay replay(const replay_options& options) const {
    if (known)
      if (const known_replays::known* k = known->find(options.capacity_bytes, options.stop_at_out_of_memory)) {
        if (options.path && k->has_path) *options.path = k->path;
        ++thread_replay_counters().replays_recalled;
        return k->result;
      }
    replay_options with_prefixes = options;
    if (cache) with_prefixes.prefixes = &cache->prefixes();
    const allocator_replay made = replay_compiled(program, with_prefixes);
    if (known) {
      const std::uint64_t kept_bytes = known->add(made, options.path, options.stop_at_out_of_memory);
      if (cache) cache->grew(kept_bytes);
    }
    return made;
  }
};

// The least capacity, in 2 MiB steps, in which the schedule's replay completes, between `fails` (a capacity
// in steps where it runs out, or one below the tensors) and `completes` (one where it completes). A
// bisection: how the segments split depends on the limit (a tighter one frees cached segments sooner), so
// completing is not monotone in the capacity, and the result is a capacity that completes with one step
// less failing, not always the least of all. log2 of the range's 2 MiB steps in probes (16 across an 80 GB
// GPU), each stopping at its first failure.
// Two savings, neither changing a probe's answer:
// - A probe's replay answers every capacity in which it would make the same choices, event for event
//   (allocator_replay::same_replay_from_bytes, planner/allocator/capacity_checks.hpp): a later probe inside
//   that range takes the answer instead of replaying (half the probes in a sweep of runs that do not fit).
//   `fails_below_bytes`: where the caller's own failing replay already answers (0: nowhere).
// - `path` is where the unlimited replay's reservations grew (replay_program.hpp): each probe is that replay
//   until its first segment past the probe's capacity, so a probe resumes from the point where the last
//   failing probe parted from it (a checkpoint), which every later probe, in more memory, shares. `start`, where
//   given, is such a checkpoint for every probe from the first (the unlimited replay's state where the budget's
//   replay, in less memory than any probe, parted from it).
std::uint64_t least_completing_capacity(const program_replays& replays, const reserved_path& path, std::uint64_t fails,
                                        std::uint64_t completes, std::uint64_t fails_below_bytes,
                                        replay_checkpoint* start = nullptr) {
  const replay_program& program = replays.program;
  constexpr std::uint64_t step = allocator_capacity_step_bytes;
  replay_checkpoint shared, parted;
  bool have_shared = start != nullptr;
  if (start) std::swap(shared, *start);
  const std::uint64_t workspaces_bytes = 2 * program.workspace_bytes;
  // What the last failing and the last completing probe answered: every later probe lies above the one and
  // below the other, so only the last of each can hold it.
  std::uint64_t failing_below_bytes = fails_below_bytes, completing_from_bytes = ~0ull, completing_to_bytes = 0;
  while (completes - fails > 1) {
    const std::uint64_t mid = fails + (completes - fails) / 2;
    const std::uint64_t capacity = mid * step;
    if (capacity < failing_below_bytes) {
      fails = mid;
      continue;
    }
    if (completing_from_bytes <= capacity && capacity <= completing_to_bytes) {
      completes = mid;
      continue;
    }
    replay_options probe;
    probe.capacity_bytes = capacity;
    probe.stop_at_out_of_memory = true;
    if (have_shared) probe.resume = &shared;
    // The first event that reserves past this capacity, where the probe parts from the unlimited replay.
    const std::uint64_t limit = capacity + workspaces_bytes;
    const auto past = std::find_if(path.begin(), path.end(), [limit](const auto& grown) { return grown.second > limit; });
    if (past != path.end() && (!have_shared || past->first > shared.next_event)) {
      probe.save = &parted;
      probe.save_before = past->first;
      parted.next_event = ~std::size_t{0};
    }
    const allocator_replay outcome = replays.replay(probe);
    if (outcome.out_of_memory) {
      fails = mid;
      failing_below_bytes = outcome.same_replay_below_bytes;
      if (probe.save && parted.next_event == probe.save_before) std::swap(shared, parted), have_shared = true;
    } else {
      completes = mid;
      completing_from_bytes = outcome.same_replay_from_bytes, completing_to_bytes = capacity;
    }
  }
  return checked_mul(completes, step, "reserved bytes");
}

}  // namespace

bool replay_makes_cublas_workspaces(const plan_result& r) {
  // PyTorch takes its cuBLAS workspaces from the caching allocator, whatever its configuration (expandable
  // segments too: aten/src/ATen/cuda/CublasHandlePool.cpp keeps each as a DataPtr of the allocator), when a thread
  // runs its first GEMM; the backward's then takes a block the forward freed, as the recorded histories show
  // (GPT-2 under autocast, checkpointed or with LoRA; a Llama under autocast: PyTorch's segments, or one 2 MiB
  // small segment fewer). Where they land decides where later tensors go, so the replay places them only where
  // its placement of blocks is checked against recorded histories: the forward op by op (a coarser forward
  // leaves free blocks PyTorch did not have, in which they would hide: the measured segments of LoRA on a bf16
  // TinyLlama hold two of 32 MiB beyond its replay's), through the default allocator. The expandable-segments
  // simulation has no recorded history yet (planner/allocator/expandable_allocator.hpp): there, as with a coarse
  // forward, they stay on the overhead line, a segment's worth each, the conservative account.
  const bool placement_checked = r.inv.forward_in_program_order && !r.run.expandable_segments;
  return replays_allocator(r.run) && placement_checked && !r.run.cublas_workspaces_held;
}

namespace {

// The schedule's settings for r: its allocator, the GPU's memory and PyTorch's cuBLAS workspaces.
schedule_settings plan_schedule_settings(const plan_result& r, const model_facts& facts) {
  schedule_settings schedule;
  schedule.expandable_segments = r.run.expandable_segments;
  schedule.gpu_total_bytes = r.gpu_memory_bytes;
  // The overhead line holds both workspaces (evaluate_plan).
  if (replay_makes_cublas_workspaces(r)) {
    schedule.workspace_bytes = r.overhead.cublas_workspace_bytes / 2;
    // A GEMM with a bias goes through cuBLASLt, with a workspace of its own (planner/allocator/allocator_trace.hpp): GPT-2's
    // Conv1D layers (addmm), Qwen2's biased q, k and v projections. The autograd engine's thread runs one only
    // where it recomputes a checkpointed layer's forward. (From the facts: a sweep's results leave r.model empty.)
    const bool biased_gemm = std::any_of(facts.tensors.begin(), facts.tensors.end(),
                                         [](const param_tensor& t) { return t.role == param_role::layer_qkv_bias; });
    if (biased_gemm) {
      schedule.lt_workspace_bytes = pytorch_cublaslt_workspace_bytes;
      schedule.lt_after = {true, r.run.recompute == recompute_mode::full};
    }
  }
  return schedule;
}

}  // namespace

allocator_schedule plan_allocator_schedule(const plan_result& r, const model_facts& facts, int steps) {
  allocator_schedule schedule = schedule_allocations(r.inv, facts, r.run.grad_accum, steps);
  plan_schedule_settings(r, facts).apply(schedule);
  return schedule;
}

std::optional<std::uint64_t> reserved_after_another_run(const plan_result& r, const model_facts& facts) {
  if (!r.allocator || r.allocator->out_of_memory || r.allocator->cache_releases > 0 || !replay_makes_cublas_workspaces(r))
    return std::nullopt;
  allocator_schedule schedule = plan_allocator_schedule(r, facts);
  schedule.workspace_bytes = 0;
  return checked_add(replay_schedule(schedule).peak_reserved_bytes, r.overhead.cublas_workspace_bytes, "reserved bytes");
}

void add_allocator_details(plan_result& r, const model_facts& facts) {
  if (!r.allocator) return;
  // (Measured with the standard loss only: the chunked losses make no [b*s, V] fp32 buffer.)
  if (!r.run.expandable_segments && r.run.loss == loss_kind::standard)
    r.loss_segment_bytes = hf_loss_segment_bytes(r.model, r.run);
  r.reserved_after_another_run_bytes = reserved_after_another_run(r, facts);
  if (const std::optional<std::uint64_t> warm = r.reserved_after_another_run_bytes) {
    const double now = static_cast<double>(r.allocator_reserved_bytes), then = static_cast<double>(*warm);
    r.allocator_edge = std::abs(then - now) >= allocator_edge_fraction * now;
  }
}

namespace {

// The replay in `capacity` and, where it runs short, the bisection for the least memory it needs: r.allocator,
// or r.allocator_replay_skipped_instances where the schedule is too large to replay.
void run_allocator_replay_in(const program_replays& replays, plan_result& r, std::uint64_t capacity);

// With `programs`: the program and, where an equal schedule was replayed in this capacity before, the outcome,
// shared (planner/allocator/program_cache.hpp).
void run_allocator_replay(plan_result& r, const model_facts& facts, std::uint64_t capacity, program_cache* programs) {
  if (const std::uint64_t instances = count_schedule_instances(r.inv, facts, r.run.grad_accum); instances > max_replayed_instances) {
    r.allocator_replay_skipped_instances = instances;  // the estimate's peak and verdict stand
    return;
  }
  if (!programs) {
    const replay_program program = compile_schedule(plan_allocator_schedule(r, facts));
    return run_allocator_replay_in({program}, r, capacity);
  }
  program_cache::entry& shared = programs->get(r.inv, facts, r.run.grad_accum, plan_schedule_settings(r, facts));
  const auto known = std::find_if(shared.outcomes.begin(), shared.outcomes.end(),
                                  [capacity](const auto& outcome) { return outcome.first == capacity; });
  if (known != shared.outcomes.end()) {
    r.allocator = known->second;
    return;
  }
  run_allocator_replay_in({shared.program, &shared.replays, programs}, r, capacity);
  shared.outcomes.emplace_back(capacity, *r.allocator);
}

void run_allocator_replay_in(const program_replays& replays, plan_result& r, std::uint64_t capacity) {
  reserved_path path;
  replay_options in_budget;
  in_budget.capacity_bytes = capacity;
  in_budget.path = &path;
  // The run stops where PyTorch raises its out-of-memory error: what it reserved, the segments it made and the
  // releases of its cache are those up to there (a replay carried on past the failure, with no limit, counted
  // segments the run never makes: 445 GB reserved on an 80 GB GPU).
  in_budget.stop_at_out_of_memory = true;
  r.allocator = replays.replay(in_budget);
  r.allocator->budget_reserved_bytes =
      r.allocator->out_of_memory ? r.allocator->reserved_before_failure_bytes : r.allocator->peak_reserved_bytes;
  constexpr std::uint64_t step = allocator_capacity_step_bytes;
  if (r.allocator->out_of_memory) {
    r.allocator->segments_made = r.allocator->segments_before_failure;
    // What it needs: the least memory in which the replay completes (the allocator frees its cached segments
    // as it runs short there too), searched between what the budget leaves it (where it failed) and what it
    // reserves with no limit (where it cannot fail: until a segment would exceed a limit, a limited replay
    // is the unlimited one). Not from the tensors up: a replay that fails in the GPU's memory may complete in
    // less (mistral-7b, seq 44,745, recompute full on an H200: out of memory in 139.8 GiB, complete in
    // 139.3), and "needs less than the GPU has" would contradict the verdict. The budget's replay answers
    // the probes in the capacities where it would make the same choices.
    reserved_path unlimited_path;
    replay_options no_limit;
    no_limit.path = &unlimited_path;
    // Every probe lies above the budget (fails, below), so each is the unlimited replay up to where the budget's
    // replay first failed a check: the unlimited replay keeps its state there for the probes to start from.
    replay_checkpoint where_budget_parts;
    where_budget_parts.next_event = ~std::size_t{0};
    no_limit.save = &where_budget_parts;
    no_limit.save_before = r.allocator->first_failed_check_event;
    const allocator_replay unlimited = replays.replay(no_limit);
    const bool parted_saved = where_budget_parts.next_event == no_limit.save_before;  // not where it was recalled
    // The tensors' peak in the allocator's blocks is the whole run's, as the replay with no limit places them:
    // whether they alone would fit the budget (tensors_fit: a failure of fragmentation) and where the search
    // starts.
    r.allocator->peak_allocated_bytes = unlimited.peak_allocated_bytes;
    const std::uint64_t fails = std::max(r.allocator->peak_allocated_bytes, capacity) / step;
    r.allocator->peak_reserved_bytes = least_completing_capacity(
        replays, unlimited_path, fails, std::max(fails + 1, (unlimited.peak_reserved_bytes + step - 1) / step),
        r.allocator->same_replay_below_bytes, parted_saved ? &where_budget_parts : nullptr);
  } else if (r.allocator->cache_releases > 0) {
    // It completes, but only by freeing its cache as it runs short: what it reserved is then nearly the whole
    // budget, a cache it would have kept, not what the run needs (a 7B run with the optimizer offloaded
    // showed a peak of the H100's whole memory and 0.2 MiB of headroom). The peak is the least memory in
    // which it completes, as for a run that does not fit. The search starts at what it reserved: a replay
    // in any capacity from that up to the budget is the same replay (it runs short at the same allocations,
    // where a segment would pass the budget, and never reserves more).
    const std::uint64_t fails = (std::max<std::uint64_t>(r.allocator->peak_allocated_bytes, 1) - 1) / step;  // below the tensors
    const std::uint64_t completes = (r.allocator->peak_reserved_bytes + step - 1) / step;
    if (completes > fails + 1 && completes * step <= capacity)
      r.allocator->peak_reserved_bytes =
          std::min(r.allocator->peak_reserved_bytes, least_completing_capacity(replays, path, fails, completes, 0));
  }
  r.allocator->tensors_fit = r.allocator->peak_allocated_bytes <= capacity;
}

}  // namespace

void apply_allocator_replay(plan_result& r, const model_facts& facts, std::uint64_t budget_bytes, plan_reuse* reuse,
                            program_cache* programs) {
  if (!replays_allocator(r.run)) return;
  if (!programs && reuse) programs = reuse->programs;
  const std::uint64_t fixed = r.overhead.fixed_bytes();
  // A budget below the GPU's memory (a safety margin) is all the allocator gets, as under
  // torch.cuda.set_per_process_memory_fraction.
  const std::uint64_t capacity = budget_bytes > fixed ? budget_bytes - fixed : 0;
  // A sweep's earlier configuration with the same schedule and budget (plan_reuse::replays): its outcome.
  run_config key = r.run;
  key.grad_accum = 0;
  const bool reusable = reuse && reuse->facts == &facts && reuse->run == key;
  const plan_reuse::replay_memo wanted{std::min<std::uint64_t>(r.run.grad_accum, 3), budget_bytes, fixed,
                                       r.overhead.cublas_workspace_bytes, r.gpu_memory_bytes, {}, 0};
  const auto same = [&wanted](const plan_reuse::replay_memo& m) {
    return m.micro_batches == wanted.micro_batches && m.budget_bytes == wanted.budget_bytes && m.fixed_bytes == wanted.fixed_bytes &&
           m.cublas_workspace_bytes == wanted.cublas_workspace_bytes && m.gpu_memory_bytes == wanted.gpu_memory_bytes;
  };
  const plan_reuse::replay_memo* known = nullptr;
  if (reusable)
    if (const auto it = std::find_if(reuse->replays.begin(), reuse->replays.end(), same); it != reuse->replays.end()) known = &*it;
  if (known) {
    r.allocator = known->allocator;
    r.allocator_replay_skipped_instances = known->skipped_instances;
  } else {
    run_allocator_replay(r, facts, capacity, programs);
    if (reusable) {
      plan_reuse::replay_memo m = wanted;
      m.allocator = r.allocator;
      m.skipped_instances = r.allocator_replay_skipped_instances;
      reuse->replays.push_back(std::move(m));
    }
  }
  if (!r.allocator) {
    set_peak_and_verdict(r, budget_bytes);
    return;
  }
  r.allocator_reserved_bytes =
      checked_add(r.allocator->peak_reserved_bytes, r.overhead.cublas_workspace_bytes, "reserved bytes");
  // The replay holds every buffer the timeline counts at once (planner/allocator/allocator_trace.hpp), so it reserves at
  // least the tensor peak; the guard keeps the line non-negative regardless.
  r.overhead.allocator_slack_bytes =
      r.allocator->peak_reserved_bytes > r.tensor_peak_bytes ? r.allocator->peak_reserved_bytes - r.tensor_peak_bytes : 0;
  set_peak_and_verdict(r, budget_bytes);
}

}  // namespace trainplan
