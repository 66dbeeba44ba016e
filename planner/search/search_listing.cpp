// What `plan search` lists (search_listing.hpp): each run's changes to the run as given, the fastest of each
// combination of changes, and the ways out from the closest run that does not fit.
#include "planner/search/search_listing.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace trainplan {
namespace {

// The flags that turn the run as given into `s`, the batch split left out (the search chooses it).
std::vector<std::string> changes_beyond_batch(const run_config& base, const config_summary& s) {
  run_config same_batch = s.run;
  same_batch.micro_batch = base.micro_batch;
  same_batch.grad_accum = base.grad_accum;
  return change_flags(base, same_batch);
}

// The key of a combination of changes: its flags, "(as given)" for none.
std::string joined(const std::vector<std::string>& flags) {
  std::string out;
  for (const std::string& f : flags) out += (out.empty() ? "" : " ") + f;
  return out.empty() ? "(as given)" : out;
}

listed_config listed(const config_summary& s, const run_config* base) {
  listed_config l{&s, {}, cost_none};
  if (base) l.changes = changes_beyond_batch(*base, s), l.costs = change_costs(*base, s.run);
  return l;
}

}  // namespace

std::vector<listed_config> best_per_change_set(const search_result& r, const run_config& base) {
  std::map<std::tuple<std::string, std::string, std::string>, const config_summary*> best;
  for (const config_summary& s : r.fitting)  // fitting is sorted fastest first: the first of a set wins
    best.emplace(std::make_tuple(s.model->spec.name, s.gpu->spec.name, joined(changes_beyond_batch(base, s))), &s);
  // Each candidate's changes and cost, worked out once (the sort and the subset test compare them often).
  std::vector<listed_config> ranked;
  for (const auto& [key, s] : best) ranked.push_back(listed(*s, &base));
  std::stable_sort(ranked.begin(), ranked.end(), [](const listed_config& a, const listed_config& b) {
    if (cost_rank(a.costs) != cost_rank(b.costs)) return cost_rank(a.costs) < cost_rank(b.costs);
    if (a.changes.size() != b.changes.size()) return a.changes.size() < b.changes.size();
    return a.summary->tokens_per_second > b.summary->tokens_per_second;
  });
  std::vector<listed_config> out;
  for (const listed_config& x : ranked) {
    const bool adds_nothing = std::any_of(out.begin(), out.end(), [&](const listed_config& smaller) {
      if (smaller.summary->model != x.summary->model || smaller.summary->gpu != x.summary->gpu) return false;
      const bool contains = std::all_of(smaller.changes.begin(), smaller.changes.end(), [&](const std::string& c) {
        return std::find(x.changes.begin(), x.changes.end(), c) != x.changes.end();
      });
      return contains && !(x.summary->peak_bytes < smaller.summary->peak_bytes &&
                           x.summary->tokens_per_second > smaller.summary->tokens_per_second);
    });
    if (!adds_nothing) out.push_back(x);
  }
  return out;
}

search_listing list_search(const search_result& r, std::size_t top, const run_config* base) {
  search_listing l;
  for (std::size_t i = 0; i < std::min(top, r.fitting.size()); ++i) l.best.push_back(listed(r.fitting[i], base));
  for (const config_summary& s : r.pareto) l.pareto.push_back(listed(s, base));
  if (base) l.by_change_set = best_per_change_set(r, *base);
  std::map<std::string, failing_component> failing;  // by name, as listed
  for (const config_summary& s : r.failing) {
    failing_component& f = failing[std::string(category_name(s.largest))];
    f.component = category_name(s.largest);
    ++f.count;
    if (!f.closest || s.peak_bytes < f.closest->peak_bytes) f.closest = &s;
  }
  for (auto& [name, f] : failing) l.failing.push_back(std::move(f));
  return l;
}

std::optional<closest_failing> ways_out_of_closest(const search_result& r) {
  if (r.failing.empty()) return std::nullopt;
  const config_summary& closest = *std::min_element(r.failing.begin(), r.failing.end(), [](const config_summary& a, const config_summary& b) {
    return static_cast<double>(a.peak_bytes) / a.budget_bytes < static_cast<double>(b.peak_bytes) / b.budget_bytes;
  });
  return closest_failing{&closest, suggest_fits(closest.model->spec, closest.run, closest.gpu->spec, closest.gpu->calib, {8})};
}

}  // namespace trainplan
