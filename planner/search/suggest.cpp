// What would make it fit (suggest.hpp): a depth-first search over the levers' axes, each candidate evaluated
// as the fit check evaluates, a shorter sequence where allowed, and each suggestion's roomiest variant.
#include "planner/search/suggest.hpp"

#include <algorithm>
#include <functional>

#include "planner/model/model_facts.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/util/input_error.hpp"
#include "planner/search/max_fit.hpp"
#include "planner/search/search.hpp"

namespace trainplan {
namespace {

// A depth-first search takes at most one change from each axis. Offload and adapters share an axis:
// offloading the state of a LoRA run saves nothing worth a suggestion.
std::vector<std::vector<lever_change>> change_axes(const model_spec& model, const run_config& run, const gpu_spec& gpu,
                                                  unsigned kept, bool offer_adapters) {
  std::vector<std::vector<lever_change>> axes;
  for (lever_bit lever : {lever_recompute, lever_attention, lever_batch, lever_precision, lever_optimizer,
                          lever_optimizer_impl, lever_ep, lever_allocator, lever_loss})
    if (!(kept & lever)) axes.push_back(lever_alternatives(lever, model, run, gpu));
  // The GPUs the run has, before more: a higher ZeRO stage over its data-parallel GPUs, combined with the
  // other levers (ZeRO-3 and full recomputation on 64 GPUs, say).
  if (!(kept & lever_gpus) && run.data_parallel() > 1) {
    std::vector<lever_change> stages;
    for (int stage = run.zero + 1; stage <= 3; ++stage)
      stages.push_back({lever_gpus, [stage](run_config& r) { r.zero = stage; }});
    axes.push_back(std::move(stages));
  }
  std::vector<lever_change> beyond;  // beyond the GPU's own memory
  for (lever_bit lever : {lever_offload, lever_adapters})
    if (!(kept & lever) && (lever != lever_adapters || offer_adapters))
      for (lever_change& c : lever_alternatives(lever, model, run, gpu)) beyond.push_back(std::move(c));
  // A change that also moves a kept lever (LoRA loads the base in the stack's default precision for LoRA, which
  // can move the precision too) is left out.
  std::erase_if(beyond, [&](const lever_change& c) {
    run_config changed = run;
    c.apply(changed);
    return (levers_changed(run, changed) & kept) != 0;
  });
  axes.push_back(std::move(beyond));
  std::erase_if(axes, [](const std::vector<lever_change>& a) { return a.empty(); });
  return axes;
}

// Candidates are evaluated like the search's (planner/search/search.hpp), against the verdict's budget: the
// whole GPU memory (no safety margin, as the fit check itself).
struct evaluator {
  sweep_model model;
  sweep_gpu gpu;
  run_config base;

  std::optional<config_summary> operator()(const run_config& candidate) const {
    return summarize_config(model, gpu, candidate, 0.0);
  }
  // A suggestion for `candidate` when it fits; nullopt otherwise (or when the GPU cannot run it at all).
  std::optional<fit_suggestion> suggestion(const run_config& candidate) const {
    const std::optional<config_summary> r = (*this)(candidate);
    if (!r || !r->fits) return std::nullopt;
    fit_suggestion s;
    s.changes = change_flags(base, candidate);
    s.run = candidate;
    s.peak_bytes = r->peak_bytes;
    s.headroom_bytes = static_cast<std::int64_t>(r->budget_bytes - r->peak_bytes);
    s.tokens_per_second = r->tokens_per_second;
    s.gpus = candidate.gpus;
    s.levers = levers_changed(base, candidate);
    s.costs = change_costs(base, candidate);
    return s;
  }
};

// The longest sequence below the run's that fits with nothing else changed, as a length people use: a
// multiple of 256 from 512 on.
std::optional<fit_suggestion> shorter_sequence(const evaluator& eval, const run_config& run) {
  if (run.seq < 2) return std::nullopt;
  run_config candidate = run;
  // Under the allocator replay fitting need not be monotone in the sequence (planner/search/max_fit.hpp). So
  // multiples of 256 are tried downward, the first that fits taken: first the 16 just below the run's (a
  // bisection can stop below a band that does not fit while longer sequences do), then from four above the
  // bisection's boundary (the multiple under it may not fit where a lower one does). A multiple is tried once.
  std::uint64_t untried = (run.seq - 1) / 256 * 256;  // the longest multiple not tried yet
  auto first_fitting_from = [&](std::uint64_t top, std::uint64_t tries) -> std::optional<fit_suggestion> {
    for (std::uint64_t seq = std::min(top, untried); seq >= 512 && tries > 0; seq -= 256, --tries) {
      untried = seq - 256;
      candidate.seq = seq;
      if (std::optional<fit_suggestion> s = eval.suggestion(candidate)) return s;
    }
    return std::nullopt;
  };
  if (std::optional<fit_suggestion> s = first_fitting_from(untried, 16)) return s;
  const std::optional<std::uint64_t> longest = largest_fitting(1, run.seq - 1, [&](std::uint64_t seq) {
    candidate.seq = seq;
    const std::optional<config_summary> r = eval(candidate);
    return r && r->fits;
  });
  if (!longest) return std::nullopt;
  if (*longest < 512) {
    candidate.seq = *longest;
    return eval.suggestion(candidate);
  }
  return first_fitting_from((*longest / 256 + 4) * 256, 12);
}

// The suggestion plus every same-numerics lever at its most frugal setting, then without each one that
// does not lower the peak (so the flags show only what buys headroom). The allocator's expandable segments
// are left to a suggestion of their own: they trim fragmentation off nearly every run on PyTorch's caching
// allocator, and would crowd every line with a setting that is simulated, not yet measured.
std::optional<fit_suggestion::variant> roomiest_variant(const evaluator& eval, const fit_suggestion& s, unsigned kept) {
  std::vector<std::function<void(run_config&)>> frugal;
  if (!(kept & lever_recompute)) frugal.push_back([](run_config& r) { r.recompute = recompute_mode::full; });
  if (!(kept & lever_optimizer_impl))
    for (lever_change& c : lever_alternatives(lever_optimizer_impl, eval.model.spec, s.run, eval.gpu.spec)) frugal.push_back(c.apply);
  if (!(kept & lever_batch) && s.run.micro_batch > 1)
    frugal.push_back([](run_config& r) {
      r.grad_accum *= r.micro_batch;
      r.micro_batch = 1;
    });
  if (!(kept & lever_attention)) frugal.push_back([](run_config& r) { r.attention = attention_kind::flash; });
  // A loss the stack ships itself (stack_profile::own_losses: torchtune's chunked cross-entropy) computes the same
  // and needs no other library.
  if (!(kept & lever_loss))
    for (const loss_kind loss : profile_of(s.run).own_losses) frugal.push_back([loss](run_config& r) { r.loss = loss; });

  auto peak_with = [&](const std::vector<bool>& on) -> std::optional<config_summary> {
    run_config r = s.run;
    for (std::size_t i = 0; i < frugal.size(); ++i)
      if (on[i]) frugal[i](r);
    return eval(r);
  };
  std::vector<bool> on(frugal.size(), true);
  std::optional<config_summary> best = peak_with(on);
  if (!best || best->peak_bytes >= s.peak_bytes) return std::nullopt;
  for (std::size_t i = 0; i < frugal.size(); ++i) {
    on[i] = false;
    const std::optional<config_summary> without = peak_with(on);
    if (without && without->peak_bytes <= best->peak_bytes) best = without;  // not needed for the headroom
    else on[i] = true;
  }
  fit_suggestion::variant v;
  v.run = best->run;
  for (const std::string& flag : change_flags(s.run, v.run)) v.added.push_back(flag);
  if (v.added.empty()) return std::nullopt;
  v.peak_bytes = best->peak_bytes;
  v.headroom_bytes = static_cast<std::int64_t>(best->budget_bytes) - static_cast<std::int64_t>(best->peak_bytes);
  v.tokens_per_second = best->tokens_per_second;
  return v;
}

}  // namespace

std::vector<fit_suggestion> suggest_fits(const model_spec& model, const run_config& run, const gpu_spec& gpu,
                                         const calibration& calib, const suggest_options& options) {
  const unsigned kept = options.kept_levers;
  const evaluator eval{{model, describe_model(model)}, {gpu, calib}, run};
  const std::vector<std::vector<lever_change>> axes = change_axes(model, run, gpu, kept, options.offer_adapters);
  std::vector<fit_suggestion> found;

  // Depth-first over axes: each axis contributes nothing or one of its changes; at most three changes.
  std::vector<const lever_change*> picked;
  std::function<void(std::size_t)> explore = [&](std::size_t next_axis) {
    if (!picked.empty()) {
      run_config candidate = run;
      for (const lever_change* c : picked) c->apply(candidate);
      if (std::optional<fit_suggestion> s = eval.suggestion(candidate)) found.push_back(std::move(*s));
    }
    if (picked.size() == 3) return;
    for (std::size_t a = next_axis; a < axes.size(); ++a)
      for (const lever_change& c : axes[a]) {
        picked.push_back(&c);
        explore(a + 1);
        picked.pop_back();
      }
  };
  explore(0);

  // More GPUs of the same kind: for each ZeRO stage, the fewest (a power of two up to 1024) that fit with
  // everything else unchanged ("the minimum number of GPUs of a kind for a run"); and, where recomputation is
  // free to change, the fewest with full recomputation too: sharding divides the model state but not the
  // activations, so a run whose activations alone fill a GPU fits on no count of GPUs without it (13B at 4k
  // tokens on 40 GB cards: ZeRO-3 and full recomputation on 8).
  if (!(kept & lever_gpus)) {
    std::vector<run_config> starts = {run};
    if (!(kept & lever_recompute) && run.recompute != recompute_mode::full) {
      starts.push_back(run);
      starts.back().recompute = recompute_mode::full;
      // And with one sequence per micro-batch, the batch kept by accumulation (as same_numerics_floor frugal run).
      if (!(kept & lever_batch) && run.micro_batch > 1) {
        starts.push_back(starts.back());
        starts.back().grad_accum = run.grad_accum * run.micro_batch;
        starts.back().micro_batch = 1;
      }
    }
    for (const run_config& start : starts) {
      bool stage_found[4] = {};
      for (const lever_change& c : lever_alternatives(lever_gpus, model, start, gpu, lever_reach{1024})) {
        run_config candidate = start;
        c.apply(candidate);
        if (stage_found[candidate.zero] || ((kept & lever_ep) && candidate.ep != run.ep)) continue;
        if (std::optional<fit_suggestion> s = eval.suggestion(candidate)) {
          stage_found[candidate.zero] = true;
          found.push_back(std::move(*s));
        }
      }
    }
  }
  if (options.allow_shorter_seq && !(kept & lever_seq))
    if (std::optional<fit_suggestion> s = shorter_sequence(eval, run)) found.push_back(std::move(*s));

  std::stable_sort(found.begin(), found.end(), [](const fit_suggestion& x, const fit_suggestion& y) {
    if (cost_rank(x.costs) != cost_rank(y.costs)) return cost_rank(x.costs) < cost_rank(y.costs);
    if (x.changes.size() != y.changes.size()) return x.changes.size() < y.changes.size();
    if (x.gpus != y.gpus) return x.gpus < y.gpus;  // fewer GPUs first: the cheapest way first
    return x.tokens_per_second > y.tokens_per_second;
  });
  // A combination that contains a smaller fitting combination adds nothing: drop it.
  std::vector<fit_suggestion> out;
  for (fit_suggestion& s : found) {
    const bool redundant = std::any_of(out.begin(), out.end(), [&](const fit_suggestion& earlier) {
      return std::all_of(earlier.changes.begin(), earlier.changes.end(), [&](const std::string& c) {
        return std::find(s.changes.begin(), s.changes.end(), c) != s.changes.end();
      });
    });
    if (!redundant) out.push_back(std::move(s));
    if (out.size() == options.max_results) break;
  }

  for (fit_suggestion& s : out) {
    s.roomiest = roomiest_variant(eval, s, kept);
    s.tight = tight_peak(s.peak_bytes, gpu, calib);
    if (s.roomiest) s.roomiest->tight = tight_peak(s.roomiest->peak_bytes, gpu, calib);
  }
  return out;
}

std::optional<std::uint64_t> same_numerics_floor(const model_spec& model, const run_config& run, const gpu_spec& gpu,
                                                 const calibration& calib) {
  run_config frugal = run;
  frugal.recompute = recompute_mode::full;
  frugal.attention = attention_kind::flash;
  frugal.grad_accum = run.grad_accum * run.micro_batch;
  frugal.micro_batch = 1;
  // Evaluated as the fit check evaluates (where the allocator is replayed, the replay's peak), so that it compares with
  // the report's own peak.
  try {
    return evaluate_plan(model, frugal, gpu, calib).peak_bytes;
  } catch (const input_error&) {
    return std::nullopt;
  }
}

}  // namespace trainplan
