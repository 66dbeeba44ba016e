#pragma once
// `plan max --levers`: the combinations of levers as a ladder of what each further step buys. The rows are
// ranked as the fit check ranks its suggestions (planner/search/suggest.hpp): cost, then fewest changes. Within
// a group of the same cost and number of changes the row reaching furthest is the group's, and a group joins
// the ladder only when it reaches further than every row above it.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "planner/run/run_config.hpp"

namespace trainplan {

// One combination of levers and the largest value it reaches.
struct ladder_row {
  run_config run;
  std::vector<std::string> changes;  // the flags that turn the run as given into `run` (change_flags)
  unsigned costs = 0;                // suggestion_cost bits (change_costs)
  std::uint64_t value = 0;           // in the question's unit (parameters for a model's size)
  std::uint64_t peak_bytes = 0;
};

// The ladder's order: cost_rank, then fewer changes. Rows equal under it form a group.
bool ladder_order(const ladder_row& a, const ladder_row& b);

// The ladder from every combination with an upper bound as its value (at least what it reaches). `reach` gives
// a row's exact value and peak (nullopt: it reaches nothing), and is asked only of the rows whose bound passes
// the ladder's top and the best of their group so far, the group's largest bounds first: reaching a row is a
// search of its own (bisection and allocator replays), a bound is cheap. On a tie the row first in `bounded`'s
// order is the group's, as when every row was reached.
std::vector<ladder_row> build_ladder(std::vector<ladder_row> bounded,
                                     const std::function<std::optional<ladder_row>(const ladder_row&)>& reach);

}  // namespace trainplan
