// `plan max --levers`' ladder (lever_ladder.hpp): rows ordered as the suggestions are, the furthest of each
// group kept when it reaches beyond every row above it.
#include "planner/search/lever_ladder.hpp"

#include <algorithm>

#include "planner/search/levers.hpp"

namespace trainplan {

bool ladder_order(const ladder_row& a, const ladder_row& b) {
  if (cost_rank(a.costs) != cost_rank(b.costs)) return cost_rank(a.costs) < cost_rank(b.costs);
  return a.changes.size() < b.changes.size();
}

std::vector<ladder_row> build_ladder(std::vector<ladder_row> bounded,
                                     const std::function<std::optional<ladder_row>(const ladder_row&)>& reach) {
  std::stable_sort(bounded.begin(), bounded.end(), ladder_order);
  std::vector<ladder_row> ladder;
  for (std::size_t i = 0; i < bounded.size();) {  // a group: the same cost and number of changes
    std::size_t end = i;
    while (end < bounded.size() && !ladder_order(bounded[i], bounded[end]) && !ladder_order(bounded[end], bounded[i])) ++end;
    std::vector<std::size_t> order(end - i);
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = i + k;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return bounded[a].value > bounded[b].value; });
    const std::uint64_t top = ladder.empty() ? 0 : ladder.back().value;
    std::optional<ladder_row> best;
    std::size_t best_index = 0;
    for (const std::size_t k : order) {
      const std::uint64_t bound = bounded[k].value;
      if (bound <= top) break;  // nor can any row after it: it cannot join the ladder
      if (best && (bound < best->value || (bound == best->value && k > best_index))) continue;
      std::optional<ladder_row> row = reach(bounded[k]);
      if (!row || row->value <= top) continue;
      if (!best || row->value > best->value || (row->value == best->value && k < best_index)) best = std::move(row), best_index = k;
    }
    if (best) ladder.push_back(std::move(*best));
    i = end;
  }
  return ladder;
}

}  // namespace trainplan
