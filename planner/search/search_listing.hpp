#pragma once
// What `plan search` lists beside its ranking (planner/search/search.hpp): each listed run's changes to the run
// as given, the fastest run of each combination of changes, the runs over the budget by their largest
// component, and the ways out from the one that came closest.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "planner/search/search.hpp"
#include "planner/search/suggest.hpp"

namespace trainplan {

// A run the search lists, and what turns the run as given into it.
struct listed_config {
  const config_summary* summary = nullptr;
  // The flags (change_flags) with the batch split left out: the search chooses it. Empty without a base.
  std::vector<std::string> changes;
  unsigned costs = cost_none;  // change_costs, the batch split included
};

// The fastest fitting run for each combination of changes (the batch split aside) and each model and GPU,
// ranked as the fit check ranks its suggestions: cost, then fewest changes, then tokens/s. A combination that
// adds changes to a listed one is listed only when it beats it on both peak and tokens/s: otherwise the smaller
// one already says it.
std::vector<listed_config> best_per_change_set(const search_result& r, const run_config& base);

// Over the budget, by the largest component at the peak (category_name), in the components' name order.
struct failing_component {
  std::string component;
  std::size_t count = 0;
  const config_summary* closest = nullptr;  // the smallest peak of them
};

struct search_listing {
  std::vector<listed_config> best;           // the `top` fastest fitting runs
  std::vector<listed_config> pareto;         // search_result::pareto
  std::vector<listed_config> by_change_set;  // with a base: best_per_change_set
  std::vector<failing_component> failing;
};

// The listing of `r` (whose summaries it points into). `base`: the run as given, when the search was widened by
// levers; the changes and costs are then set, and by_change_set.
search_listing list_search(const search_result& r, std::size_t top, const run_config* base);

// The failing run that came closest to its budget (the smallest peak relative to it), and the fit check's
// suggestions for it (up to 8: more GPUs of its kind with ZeRO, offload, adapters...). nullopt when none failed.
struct closest_failing {
  const config_summary* summary = nullptr;
  std::vector<fit_suggestion> ways;
};
std::optional<closest_failing> ways_out_of_closest(const search_result& r);

}  // namespace trainplan
