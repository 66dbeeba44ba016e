#include "planner/max_fit.hpp"

namespace trainplan {

std::optional<std::uint64_t> largest_fitting(std::uint64_t lo, std::uint64_t hi,
                                             const std::function<bool(std::uint64_t)>& fits) {
  if (lo > hi || !fits(lo)) return std::nullopt;
  if (fits(hi)) return hi;
  // Invariant: fits(lo), !fits(hi).
  while (hi - lo > 1) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (fits(mid)) lo = mid;
    else hi = mid;
  }
  return lo;
}

}  // namespace trainplan
