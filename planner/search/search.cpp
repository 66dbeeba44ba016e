// The configuration search (search.hpp): each configuration summarised with the fit check's verdict, the
// space widened by levers, the ranking by tokens/s and the Pareto front of peak memory against tokens/s.
#include "planner/search/search.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <exception>
#include <cmath>
#include <iterator>
#include <map>
#include <thread>

#include "planner/allocator/program_cache.hpp"
#include "planner/search/sweep_runner.hpp"
#include "planner/util/checked_math.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {

std::uint64_t memory_budget(const gpu_spec& gpu, double margin) {
  return static_cast<std::uint64_t>(std::floor(static_cast<double>(gpu.memory_bytes) * (1.0 - margin)));
}

bool tight_peak(std::uint64_t peak_bytes, const gpu_spec& gpu, const calibration& calib) {
  return peak_bytes > memory_budget(gpu, calib.safety_margin_fraction);
}

bool tight_fit(const plan_result& r) { return r.fits && tight_peak(r.peak_bytes, r.gpu, r.calib); }

std::optional<config_summary> summarize_config(const sweep_model& model, const sweep_gpu& gpu, const run_config& run,
                                               double margin, std::string* why, replay_when replay, program_cache* programs) {
  plan_options options;
  options.detail = timeline_detail::peak;
  options.facts = &model.facts;
  options.copy_specs = false;  // the caller holds the model and the GPU
  try {
    plan_result p = evaluate_plan(model.spec, run, gpu.spec, gpu.calib, options);
    const std::uint64_t budget = memory_budget(gpu.spec, margin);
    // Where the allocator is replayed (replays_allocator) the verdict is the replay's, as the fit check's
    // (planner/evaluate/plan.hpp). The replay gets the whole GPU, as in the fit check, and the margin is kept free
    // beyond its peak: replayed in the smaller budget, the allocator would free cached segments sooner and could
    // complete below the peak `plan` reports for the same run (mistral-7b, bf16, seq 2048 on an H100: 70.41 GiB within
    // a 10% margin, 74.02 GiB on the whole GPU), and search, max and the fit check would then disagree on a run's peak.
    // Where the tensors alone pass the margin's budget it does not fit either way, and the replay is skipped.
    const std::uint64_t floor = checked_add(p.tensor_peak_bytes, checked_add(p.overhead.cuda_context_bytes,
                                                                             p.overhead.cublas_workspace_bytes, "overhead"),
                                            "floor bytes");
    const std::uint64_t whole_gpu = memory_budget(gpu.spec, 0.0);
    if (replay == replay_when::always) apply_allocator_replay(p, model.facts, whole_gpu, nullptr, programs);
    else if (replay == replay_when::tensors_fit && floor <= budget) confirm_with_allocator_replay(p, model.facts, whole_gpu, programs);
    config_summary s;
    s.peak_is_floor = replay == replay_when::tensors_fit && floor > budget && replays_allocator(run);
    s.model = &model;
    s.gpu = &gpu;
    s.run = run;
    s.peak_bytes = p.peak_bytes;
    s.budget_bytes = budget;
    s.floor_bytes = floor;
    // the fit check's verdict, host memory included (and the replay's, when it ran)
    s.fits = p.peak_bytes <= s.budget_bytes && p.host_fits && !(p.allocator && p.allocator->out_of_memory);
    s.tokens_per_second = p.time.tokens_per_second;
    s.mfu = p.time.mfu;
    s.step_seconds = p.time.step_seconds;
    s.overhead_bytes = p.overhead.total();
    std::uint64_t largest = 0;
    for (int c = 0; c < tensor_category_count; ++c) {
      s.category_bytes[c] = p.timeline.category_bytes_at_peak[c];
      if (s.category_bytes[c] > largest) largest = s.category_bytes[c], s.largest = static_cast<tensor_category>(c);
    }
    return s;
  } catch (const input_error& e) {
    if (why) *why = e.what();
    return std::nullopt;
  }
}

namespace {

template <typename T>
void add_unique(std::vector<T>& axis, const T& value) {
  if (std::find(axis.begin(), axis.end(), value) == axis.end()) axis.push_back(value);
}

}  // namespace

void widen_by_levers(sweep_space& space, unsigned levers, const lever_reach& reach) {
  if (levers & lever_seq) throw input_error("--levers: seq is not a search lever; give --seq a list instead");
  if (space.size() == 0) return;
  const sweep_space::point first = space.at(0);
  const run_config& base = first.run;
  // The axes that were not swept hold the base's value from now on.
  if (space.layouts.empty()) space.layouts.push_back({base.gpus, base.zero, base.ep});
  if (space.offloads.empty()) space.offloads.push_back(base.offload);
  if (space.finetunes.empty()) space.finetunes.push_back(base.finetune);
  if (space.optimizer_impls.empty()) space.optimizer_impls.push_back(base.optimizer_impl);
  if (space.expandable_segments.empty()) space.expandable_segments.push_back(base.expandable_segments);
  std::vector<run_config> alternatives;
  for (unsigned i = 0; i < lever_count; ++i) {
    const auto lever = static_cast<lever_bit>(1u << i);
    if (!(levers & lever)) continue;
    for (const sweep_model& model : space.models)
      for (const sweep_gpu& gpu : space.gpus)
        for (const lever_change& c : lever_alternatives(lever, model.spec, base, gpu.spec, reach))
          c.apply(alternatives.emplace_back(base));
  }
  for (const run_config& r : alternatives) {
    add_unique(space.precisions, r.precision);
    add_unique(space.grad_dtypes, r.grad_dtype);
    add_unique(space.optimizers, r.optimizer);
    add_unique(space.optimizer_impls, r.optimizer_impl);
    add_unique<bool>(space.expandable_segments, r.expandable_segments);
    add_unique(space.recomputes, r.recompute);
    add_unique(space.attentions, r.attention);
    add_unique(space.micro_batches, r.micro_batch);
    add_unique(space.finetunes, r.finetune);
    add_unique(space.offloads, r.offload);
    const bool layout_known = std::any_of(space.layouts.begin(), space.layouts.end(), [&](const sweep_space::gpu_layout& l) {
      return l.gpus == r.gpus && l.zero == r.zero && l.ep == r.ep;
    });
    if (!layout_known) space.layouts.push_back({r.gpus, r.zero, r.ep});
  }
  space.size();  // rejects a widened space beyond 2^64 configurations, with its message
}

namespace {

// A failing row's peak as plan gives it: the summary again with the replay (and the bisection for the least
// memory it completes in). The verdict stays: its floor alone passes the budget.
void replay_peak(config_summary& s, double margin, program_cache* programs) {
  if (!s.peak_is_floor) return;
  if (std::optional<config_summary> r = summarize_config(*s.model, *s.gpu, s.run, margin, nullptr, replay_when::always, programs)) s = *r;
}

// Replays, among `rows`, every one whose peak could give the least `key` (ties to the first in `rows`' order, as
// min_element and list_search take it): in the order of the key of its floor, a lower bound of its peak's (the
// replay reserves at least the tensor peak: planner/evaluate/plan.cpp), until that bound passes the least key
// known. Exact: no row left out can have a smaller or equal key.
template <class key_fn>
void replay_least(std::vector<config_summary*> rows, double margin, program_cache* programs, key_fn key) {
  const auto bound = [&key](const config_summary& s) {
    config_summary at_floor = s;
    at_floor.peak_bytes = s.floor_bytes;
    return key(at_floor);
  };
  bool known = false;
  decltype(key(*rows.front())) best{};
  for (const config_summary* r : rows)
    if (!r->peak_is_floor && (!known || key(*r) < best)) best = key(*r), known = true;
  std::stable_sort(rows.begin(), rows.end(), [&bound](const config_summary* a, const config_summary* b) { return bound(*a) < bound(*b); });
  for (config_summary* r : rows) {
    if (!r->peak_is_floor) continue;
    if (known && bound(*r) > best) break;
    replay_peak(*r, margin, programs);
    if (!known || key(*r) < best) best = key(*r), known = true;
  }
}

// The failing rows' peaks the listing shows, replayed (search_result::failing); the others' left at the floor.
void replay_shown_failing(std::vector<config_summary>& failing, double margin, program_cache* programs) {
  if (failing.empty()) return;
  std::map<tensor_category, std::vector<config_summary*>> by_component;  // list_search's smallest per component
  std::vector<config_summary*> all;
  for (config_summary& s : failing) by_component[s.largest].push_back(&s), all.push_back(&s);
  for (auto& [component, rows] : by_component)
    replay_least(rows, margin, programs, [](const config_summary& s) { return s.peak_bytes; });
  // ways_out_of_closest's: the least peak relative to its budget
  replay_least(all, margin, programs, [](const config_summary& s) { return static_cast<double>(s.peak_bytes) / s.budget_bytes; });
  for (config_summary& s : failing)
    if (s.peak_is_floor) s.peak_bytes = s.floor_bytes;
}

}  // namespace

bool dominates(const config_summary& a, const config_summary& b) {
  const bool no_worse = a.peak_bytes <= b.peak_bytes && a.tokens_per_second >= b.tokens_per_second;
  const bool better = a.peak_bytes < b.peak_bytes || a.tokens_per_second > b.tokens_per_second;
  return no_worse && better;
}

namespace {

// One point of a search: unreachable (the target batch cannot be split), or evaluated, with its summary (none:
// it cannot run, for `why`).
struct point_outcome {
  bool reachable = false;
  std::optional<config_summary> summary;
  std::string why;
};

point_outcome search_point(const sweep_space& space, std::uint64_t k, std::uint64_t target_tokens_per_step, double margin,
                           program_cache* programs) {
  point_outcome o;
  sweep_space::point p = space.at(k);
  // Tokens one accumulation step adds across the data-parallel replicas.
  const std::uint64_t tokens_per_micro_batch = p.run.seq * p.run.micro_batch * p.run.data_parallel();
  if (tokens_per_micro_batch == 0 || target_tokens_per_step % tokens_per_micro_batch != 0 ||
      tokens_per_micro_batch > target_tokens_per_step)
    return o;
  p.run.grad_accum = target_tokens_per_step / tokens_per_micro_batch;
  o.reachable = true;
  o.summary = summarize_config(*p.model, *p.gpu, p.run, margin, &o.why, replay_when::tensors_fit, programs);
  return o;
}

// The order a search evaluates its points in: the optimizer's axes innermost (its kind, implementation, offload
// and the layout that shards it), then those that change only the buffers' sizes or the allocator's settings
// (accumulation, micro-batch, sequence, dropout, expandable segments), then the others as the index orders them.
// Programs that begin alike (the same run up to the first optimizer step: prefix_checkpoints, replay_program.hpp)
// or replay alike (program_cache.hpp) then come together, and a unit (the points that differ only in those inner
// axes) holds every size of the schedules it builds (program_cache's structures); a worker takes whole units, so
// it builds each structure once and finds its variants in its own caches. Each result is placed by its index, so
// the listing is the same in any order.
class evaluation_order {
 public:
  explicit evaluation_order(const sweep_space& space) : radices_(space.radices()) {
    std::uint64_t stride = 1;
    for (std::size_t d = 0; d < sweep_space::digit_count; ++d) strides_[d] = stride, stride *= radices_[d];  // size() checked it
    for (std::size_t k = 0; k < inner_digits; ++k) unit_points_ *= radices_[order[k]];
  }
  // The index of the point evaluated `position`-th.
  std::uint64_t index(std::uint64_t position) const {
    std::uint64_t index = 0;
    for (const std::size_t d : order) {
      index += position % radices_[d] * strides_[d];
      position /= radices_[d];
    }
    return index;
  }
  std::uint64_t unit_points() const { return unit_points_; }

 private:
  static constexpr std::size_t inner_digits = 9;  // those a unit spans
  static constexpr std::array<std::size_t, sweep_space::digit_count> order = {
      sweep_space::optimizer_digit, sweep_space::optimizer_impl_digit, sweep_space::offload_digit, sweep_space::layout_digit,
      sweep_space::accum_digit, sweep_space::micro_batch_digit, sweep_space::seq_digit, sweep_space::dropout_digit,
      sweep_space::expandable_digit, sweep_space::attention_digit, sweep_space::recompute_digit, sweep_space::finetune_digit,
      sweep_space::grad_dtype_digit, sweep_space::precision_digit, sweep_space::gpu_digit, sweep_space::model_digit};
  std::array<std::uint64_t, sweep_space::digit_count> radices_{}, strides_{};
  std::uint64_t unit_points_ = 1;
};

// Points a worker takes at a time: a unit of the evaluation order, or a part of one where the search has too
// few units to keep every worker busy to the end (sixteen blocks a worker at least); never fewer than 64 points
// (a replayed point costs a fraction of a millisecond to several, an analytic one a few microseconds), whole
// units where they are smaller.
constexpr std::uint64_t least_block_points = 64;
std::uint64_t search_block_points(const evaluation_order& order, std::uint64_t total, unsigned workers) {
  constexpr std::uint64_t least = least_block_points;
  const std::uint64_t unit = order.unit_points();
  if (unit < least) return unit * ((least + unit - 1) / unit);
  return std::max(least, std::min(unit, total / (16 * std::uint64_t{workers})));
}

}  // namespace

search_result search_configs(const sweep_space& space, std::uint64_t target_tokens_per_step, double margin, bool share_programs,
                             unsigned threads) {
  if (target_tokens_per_step == 0) throw input_error("the target batch must be at least one token");
  if (margin < 0 || margin >= 1) throw input_error("--margin must be at least 0 and below 1");
  if (!space.global_batches.empty() || space.grad_accums != std::vector<std::uint64_t>{1})
    throw input_error("the search chooses the accumulation from the target batch: give no --grad-accum or --global-batch");
  search_result out;
  const std::uint64_t total = space.size();
  const evaluation_order order(space);
  threads = static_cast<unsigned>(std::min<std::uint64_t>(sweep_workers(threads), std::max<std::uint64_t>(1, total / least_block_points)));
  const std::uint64_t block_points = search_block_points(order, total, threads);
  // A worker's programs, kept through the search (the cache is not shared between threads: each shares the
  // programs of the points it evaluated; equal schedules give equal outcomes either way).
  std::vector<program_cache> caches;
  for (unsigned w = 0; w < threads; ++w) caches.emplace_back(program_cache::bytes_per_worker(threads));
  // What each worker found: its summaries with their points' indices, put in index order at the end (the
  // listing's ties keep the order of a search on one thread that walked the index), and its counts.
  struct found {
    std::vector<std::pair<std::uint64_t, config_summary>> fitting, failing;
    std::uint64_t evaluated = 0, unreachable = 0, invalid = 0, first_invalid_index = ~0ull;
    std::string first_invalid_reason;
    std::exception_ptr thrown;  // an internal error, rethrown here as a search on one thread would throw it
  };
  std::vector<found> by_worker(threads);
  const std::uint64_t blocks = (total + block_points - 1) / block_points;
  std::atomic<std::uint64_t> next_block{0};
  auto work = [&](unsigned worker) {
    found& f = by_worker[worker];
    try {
      program_cache* programs = share_programs ? &caches[worker] : nullptr;
      for (std::uint64_t b; (b = next_block.fetch_add(1)) < blocks;)
        for (std::uint64_t position = b * block_points; position < std::min(total, (b + 1) * block_points); ++position) {
          const std::uint64_t index = order.index(position);
          point_outcome o = search_point(space, index, target_tokens_per_step, margin, programs);
          if (!o.reachable) {
            ++f.unreachable;
            continue;
          }
          ++f.evaluated;
          if (!o.summary) {
            ++f.invalid;
            if (index < f.first_invalid_index) f.first_invalid_index = index, f.first_invalid_reason = std::move(o.why);
          } else if (o.summary->fits) f.fitting.emplace_back(index, std::move(*o.summary));
          else f.failing.emplace_back(index, std::move(*o.summary));
        }
    } catch (...) {
      f.thrown = std::current_exception();
      next_block = blocks;  // the others stop at their next block
    }
  };
  std::vector<std::thread> workers;
  for (unsigned w = 1; w < threads; ++w) workers.emplace_back(work, w);
  work(0);  // this thread works too
  for (std::thread& w : workers) w.join();
  std::vector<std::pair<std::uint64_t, config_summary>> fitting, failing;
  std::uint64_t first_invalid_index = ~0ull;
  for (found& f : by_worker) {
    if (f.thrown) std::rethrow_exception(f.thrown);
    out.evaluated += f.evaluated, out.unreachable += f.unreachable, out.invalid += f.invalid;
    if (f.first_invalid_index < first_invalid_index) first_invalid_index = f.first_invalid_index, out.first_invalid_reason = f.first_invalid_reason;
    std::move(f.fitting.begin(), f.fitting.end(), std::back_inserter(fitting));
    std::move(f.failing.begin(), f.failing.end(), std::back_inserter(failing));
  }
  for (auto [from, to] : {std::pair{&fitting, &out.fitting}, std::pair{&failing, &out.failing}}) {
    std::sort(from->begin(), from->end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    to->reserve(from->size());
    for (auto& [index, summary] : *from) to->push_back(std::move(summary));
  }
  program_cache* programs = share_programs ? &caches[0] : nullptr;
  replay_shown_failing(out.failing, margin, programs);
  for (const program_cache& c : caches) out.programs_shared += c.hits();
  std::stable_sort(out.fitting.begin(), out.fitting.end(), [](const config_summary& a, const config_summary& b) {
    if (a.tokens_per_second != b.tokens_per_second) return a.tokens_per_second > b.tokens_per_second;
    // Equal speed (with flash attention, selective recomputation changes nothing): prefer less
    // recomputation, then fewer, larger GEMMs, then more headroom.
    if (a.run.recompute != b.run.recompute) return a.run.recompute < b.run.recompute;
    if (a.run.micro_batch != b.run.micro_batch) return a.run.micro_batch > b.run.micro_batch;
    return a.peak_bytes < b.peak_bytes;
  });
  // Pareto front: by ascending peak, keep each run faster than every run with a smaller peak.
  std::vector<config_summary> by_peak = out.fitting;
  std::stable_sort(by_peak.begin(), by_peak.end(), [](const config_summary& a, const config_summary& b) {
    if (a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
    return a.tokens_per_second > b.tokens_per_second;
  });
  double best_speed = -1;
  for (const config_summary& s : by_peak)
    if (s.tokens_per_second > best_speed) out.pareto.push_back(s), best_speed = s.tokens_per_second;
  return out;
}

}  // namespace trainplan
