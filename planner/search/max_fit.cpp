// The bisections behind `plan max` (max_fit.hpp): the largest value that fits, the climb and grid look above it
// where fitting is not monotone, and the divisors a kept global batch allows.
#include "planner/search/max_fit.hpp"

#include <algorithm>

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

std::uint64_t climb_largest_fitting(std::uint64_t best, std::uint64_t hi, std::uint64_t stride,
                                    const std::function<fit_probe(std::uint64_t)>& probe) {
  constexpr std::uint64_t max_probes = 256;
  stride = std::max<std::uint64_t>(stride, 1);
  // On the grid: the first grid value above best, then every stride.
  std::uint64_t found = 0;
  std::uint64_t probes = 0;
  for (std::uint64_t v = (best / stride + 1) * stride; v <= hi && probes < max_probes; v += stride, ++probes) {
    const fit_probe p = probe(v);
    if (p == fit_probe::beyond) break;
    if (p == fit_probe::fits) found = v;
    if (v > hi - stride) break;  // the next grid value would pass hi (or wrap)
  }
  if (!found) return best;
  std::uint64_t climbed = found;
  for (std::uint64_t v = found + 1; stride > 1 && v < found + stride && v <= hi; ++v)
    if (probe(v) == fit_probe::fits) climbed = v;
  return climbed;
}

std::vector<std::uint64_t> grid_misses_below(std::uint64_t best, std::uint64_t stride,
                                             const std::function<fit_probe(std::uint64_t)>& probe) {
  constexpr std::uint64_t max_probes = 256, fits_in_a_row = 16;
  stride = std::max<std::uint64_t>(stride, 1);
  std::vector<std::uint64_t> misses;
  if (best == 0) return misses;
  // The largest grid value below best, then every stride, to 16 fits in a row.
  std::uint64_t in_a_row = 0, probes = 0;
  for (std::uint64_t v = (best - 1) / stride * stride; v >= 1 && in_a_row < fits_in_a_row && probes < max_probes;
       v -= stride, ++probes) {
    if (probe(v) == fit_probe::fits) {
      ++in_a_row;
    } else {
      misses.push_back(v);
      in_a_row = 0;
    }
    if (v < stride) break;
  }
  std::reverse(misses.begin(), misses.end());
  return misses;
}

refined_fit refine_largest_fitting(std::uint64_t best, std::uint64_t hi, std::uint64_t stride,
                                   const std::function<fit_probe(std::uint64_t)>& probe) {
  refined_fit r;
  r.best = climb_largest_fitting(best, hi, stride, probe);
  r.misses_below = grid_misses_below(r.best, stride, probe);
  return r;
}

candidate_fit largest_fitting_candidate(const std::vector<std::uint64_t>& ascending,
                                        const std::function<fit_probe(std::uint64_t)>& probe, bool name_misses) {
  constexpr std::uint64_t fits_in_a_row = 16;
  candidate_fit r;
  std::size_t i = ascending.size();
  while (i > 0 && !r.best) {
    --i;
    if (probe(ascending[i]) == fit_probe::fits) {
      r.best = ascending[i];
      if (i + 1 < ascending.size()) r.next = ascending[i + 1];
    }
  }
  if (!r.best || !name_misses) return r;
  std::uint64_t in_a_row = 0;
  while (i > 0 && in_a_row < fits_in_a_row) {
    --i;
    if (probe(ascending[i]) == fit_probe::fits) {
      ++in_a_row;
    } else {
      r.misses_below.push_back(ascending[i]);
      in_a_row = 0;
    }
  }
  std::reverse(r.misses_below.begin(), r.misses_below.end());
  return r;
}

std::vector<std::uint64_t> largest_proper_divisors(std::uint64_t n, std::size_t count) {
  std::vector<std::uint64_t> out;
  constexpr std::uint64_t trial_limit = 1ull << 20;
  for (std::uint64_t p = 2; p <= n && p <= trial_limit && out.size() < count; ++p)
    if (n % p == 0) out.push_back(n / p);
  if (n > 1 && out.size() < count && (out.empty() || out.back() != 1)) out.push_back(1);
  return out;
}

std::vector<std::uint64_t> divisors_up_to(std::uint64_t n, std::uint64_t hi) {
  // Trial division up to hi (not sqrt(n): n may be near 2^64, hi is the search's limit, 2^24 at most).
  std::vector<std::uint64_t> out;
  for (std::uint64_t d = 1; d <= std::min(n, hi); ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

}  // namespace trainplan
