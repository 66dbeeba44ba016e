// `plan max` (max_search.hpp): the quantity set on the run, its search limit, the bisection with each value
// judged as the search judges it, and the ladder over levers.
#include "planner/search/max_search.hpp"

#include <string>

#include "planner/io/shape_from_params.hpp"
#include "planner/model/param_count.hpp"
#include "planner/search/levers.hpp"
#include "planner/search/max_fit.hpp"
#include "planner/search/search.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {
namespace {

// Sets the quantity searched: the sequence, the micro-batch, or the model (a derived llama shape of v million
// parameters). `per_gpu_batch` (micro_batch with the global batch kept: the sequences each data-parallel GPU
// takes a step) keeps the global batch: the accumulation makes up the rest.
void set_quantity(max_quantity what, std::uint64_t v, sweep_model& model, run_config& run, std::uint64_t per_gpu_batch = 0) {
  if (what == max_quantity::params) {
    model.spec = derive_llama_shape(v * 1'000'000ull);
    model.facts = describe_model(model.spec);
  } else if (what == max_quantity::seq) {
    // Under context parallelism a sequence splits into 2 cp chunks (planner/evaluate/plan.cpp): v rounds up to the
    // next such length, so the largest v that fits is one.
    const std::uint64_t unit = run.cp > 1 ? 2 * run.cp : 1;
    run.seq = (v + unit - 1) / unit * unit;
  } else {
    run.micro_batch = v;
    if (per_gpu_batch) run.grad_accum = per_gpu_batch / v;
  }
}

std::uint64_t stride_of(max_quantity what) { return what == max_quantity::seq ? max_seq_grid : 1; }

// One search over one model and run: the question's, or one ladder row's.
class max_searcher {
 public:
  explicit max_searcher(const max_question& q) : q_(q), limit_(max_search_limit(q)) {}

  // The largest value that fits (the answer, or one ladder row's), with `name_misses` the smaller ones on the
  // grid that do not. Leaves m and c at the maximum.
  struct reach {
    std::optional<std::uint64_t> best, next;
    std::vector<std::uint64_t> misses_below;
  };
  reach reach_of(sweep_model& m, run_config& c, bool name_misses) const {
    const std::uint64_t per_gpu_batch = q_.keep_global_batch ? c.micro_batch * c.grad_accum : 0;
    auto probe = [&](std::uint64_t v) { return probe_value(v, m, c, per_gpu_batch); };
    reach out;
    if (q_.keep_global_batch) {
      const candidate_fit f = largest_fitting_candidate(divisors_up_to(per_gpu_batch, limit_), probe, name_misses);
      out.best = f.best, out.next = f.next, out.misses_below = f.misses_below;
      if (!out.best) {  // as in bisect: a configuration that cannot exist even at micro-batch 1 is an error
        set_quantity(q_.what, 1, m, c, per_gpu_batch);
        std::string why;
        if (!summarize_config(m, q_.gpu, c, q_.margin, &why)) throw input_error(why);
      }
    } else {
      out.best = bisect(m, c, 0, replay_when::tensors_fit, [](const config_summary& s) { return s.fits; });
      if (out.best && q_.what != max_quantity::params) {
        if (name_misses) {
          const refined_fit around = refine_largest_fitting(*out.best, limit_, stride_of(q_.what), probe);
          out.best = around.best, out.misses_below = around.misses_below;
        } else {
          out.best = climb_largest_fitting(*out.best, limit_, stride_of(q_.what), probe);
        }
      }
      if (out.best && *out.best < limit_) out.next = *out.best + 1;
    }
    if (out.best) set_quantity(q_.what, *out.best, m, c, per_gpu_batch);
    return out;
  }

  // The bisection's boundary: the largest value whose summary passes `passes`. A configuration that cannot
  // exist at the smallest value is an error in the options, not "nothing fits".
  template <typename Passes>
  std::optional<std::uint64_t> bisect(sweep_model& m, run_config& c, std::uint64_t per_gpu_batch, replay_when replay,
                                      Passes passes) const {
    return largest_fitting(1, limit_, [&](std::uint64_t v) {
      set_quantity(q_.what, v, m, c, per_gpu_batch);
      std::string why;
      const std::optional<config_summary> s = summarize_config(m, q_.gpu, c, q_.margin, &why, replay);
      if (!s && v == 1) throw input_error(why);
      return s && passes(*s);
    });
  }

  // Its peak as plan gives it.
  max_peak peak_at(const sweep_model& m, const run_config& c) const {
    std::string why;
    // (replayed whatever the floor: a value beyond the budget shows its replay's peak too, as plan does)
    const std::optional<config_summary> s = summarize_config(m, q_.gpu, c, q_.margin, &why, replay_when::always);
    if (!s) throw input_error(why);
    return {s->peak_bytes, s->budget_bytes};
  }

  // best in the answer's unit.
  std::uint64_t value_of(const sweep_model& m, std::uint64_t best) const {
    return q_.what == max_quantity::params ? count_params(m.spec).total : best;
  }

  std::uint64_t limit() const { return limit_; }

 private:
  // One value as a probe around the boundary sees it: fits, fails, or beyond (its tensors alone exceed the
  // budget, or it cannot exist).
  fit_probe probe_value(std::uint64_t v, sweep_model& m, run_config& c, std::uint64_t per_gpu_batch) const {
    set_quantity(q_.what, v, m, c, per_gpu_batch);
    const std::optional<config_summary> s = summarize_config(m, q_.gpu, c, q_.margin);
    if (!s || s->floor_bytes > s->budget_bytes) return fit_probe::beyond;
    return s->fits ? fit_probe::fits : fit_probe::fails;
  }

  const max_question& q_;
  std::uint64_t limit_;
};

}  // namespace

std::uint64_t max_search_limit(const max_question& q) {
  if (q.what == max_quantity::params) return 10'000'000;  // 10T parameters, in millions
  if (q.what == max_quantity::seq && q.model.spec.max_positions) return q.model.spec.max_positions;
  return 1ull << 24;
}

max_answer find_max(const max_question& q) {
  const max_searcher search(q);
  max_answer a;
  a.model = q.model;
  a.run = q.run;
  a.limit = search.limit();
  a.stride = stride_of(q.what);
  a.budget_bytes = memory_budget(q.gpu.spec, q.margin);
  const max_searcher::reach r = search.reach_of(a.model, a.run, true);
  a.best = r.best, a.next = r.next, a.misses_below = r.misses_below;
  if (!a.best) return a;
  if (a.next) {  // one step more, its peak as plan gives it: the replay's least memory, not the estimate
    sweep_model m = a.model;
    run_config c = a.run;
    set_quantity(q.what, *a.next, m, c, q.keep_global_batch ? a.run.micro_batch * a.run.grad_accum : 0);
    if (const std::optional<config_summary> s = summarize_config(m, q.gpu, c, q.margin, nullptr, replay_when::always))
      a.one_more = max_peak{s->peak_bytes, s->budget_bytes};
  }
  a.at_max = search.peak_at(a.model, a.run);
  a.value = search.value_of(a.model, *a.best);
  return a;
}

std::vector<ladder_row> max_lever_ladder(const max_question& q, unsigned levers, std::size_t top) {
  if ((levers & lever_batch) && q.what == max_quantity::micro_batch)
    throw input_error("--levers: batch is the question itself in max micro-batch");
  if (levers & lever_seq) throw input_error("--levers: seq is not a lever of max (ask max seq instead)");
  const max_searcher search(q);
  // Reaching every combination as find_max does (bisection, then the climb with a replay at every step) took
  // minutes for nine levers. A combination's value is at most the largest whose tensors alone fit the budget
  // (no replay: tensor bytes grow with the quantity, and a fit needs them to), so the ladder is built in its
  // own order and only a combination whose bound passes the rows above it is reached.
  std::vector<ladder_row> bounded;  // every combination that can run, value = its bound
  for (const run_config& candidate : lever_space(levers, q.model.spec, q.run, q.gpu.spec, lever_reach{8})) {
    sweep_model m = q.model;
    run_config c = candidate;
    const std::uint64_t per_gpu_batch = q.keep_global_batch ? c.micro_batch * c.grad_accum : 0;
    std::optional<std::uint64_t> bound;
    try {
      bound = search.bisect(m, c, per_gpu_batch, replay_when::never,
                            [](const config_summary& s) { return s.floor_bytes <= s.budget_bytes; });
    } catch (const input_error&) {
      continue;  // a combination that cannot run at all reaches nothing
    }
    if (!bound) continue;
    set_quantity(q.what, *bound, m, c, per_gpu_batch);
    bounded.push_back({candidate, change_flags(q.run, candidate), change_costs(q.run, candidate), search.value_of(m, *bound), 0});
  }
  std::vector<ladder_row> ladder = build_ladder(std::move(bounded), [&](const ladder_row& row) -> std::optional<ladder_row> {
    sweep_model m = q.model;
    run_config c = row.run;
    std::optional<std::uint64_t> v;
    try {
      v = search.reach_of(m, c, false).best;
    } catch (const input_error&) {
      return std::nullopt;
    }
    if (!v) return std::nullopt;
    ladder_row reached = row;
    reached.run = c;
    reached.value = search.value_of(m, *v);
    reached.peak_bytes = search.peak_at(m, c).peak_bytes;
    return reached;
  });
  if (ladder.size() > top) ladder.resize(top);
  return ladder;
}

}  // namespace trainplan
