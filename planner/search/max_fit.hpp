#pragma once
// The inverse questions: the longest sequence, the largest micro-batch, the largest model of a family
// that fits a GPU under given settings. Peak memory grows with each of these, so a binary search finds
// the boundary.
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace trainplan {

// The largest v in [lo, hi] with fits(v), assuming fits is true up to some point and false after;
// nullopt when fits(lo) is false.
std::optional<std::uint64_t> largest_fitting(std::uint64_t lo, std::uint64_t hi,
                                             const std::function<bool(std::uint64_t)>& fits);

// What a probe around the boundary found at one value: it fits, it does not, or it cannot (its tensors alone
// exceed the budget, so no larger value fits either: the scan upward stops there).
enum class fit_probe { fits, fails, beyond };

// Under the allocator replay, fitting is not monotone: how the caching allocator splits its segments depends
// on exact sizes (tinyllama-1.1b, micro-batch 8, amp-bf16 on an H100: sequences 2,928 and 2,944 fit, 2,880
// and 2,912 do not). The bisection's boundary is then one boundary, not always the last, and not every
// smaller value fits. Two looks around it, on a grid of `stride` (1 for micro-batches; for sequences the
// multiples people use):
//   - `climb_largest_fitting`: upward, the grid values above `best` while their tensors fit (at most 256):
//     the largest that fits becomes the answer, then the values between it and the next grid value are tried
//     one by one;
//   - `grid_misses_below`: downward, the grid values below `best` that do not fit, until 16 in a row fit (at
//     most 256 tried).
// `refine_largest_fitting` does both: the answer `plan max` gives and the smaller values it warns about.
std::uint64_t climb_largest_fitting(std::uint64_t best, std::uint64_t hi, std::uint64_t stride,
                                    const std::function<fit_probe(std::uint64_t)>& probe);
std::vector<std::uint64_t> grid_misses_below(std::uint64_t best, std::uint64_t stride,
                                             const std::function<fit_probe(std::uint64_t)>& probe);

struct refined_fit {
  std::uint64_t best = 0;
  std::vector<std::uint64_t> misses_below;  // ascending: values on the grid below best that do not fit
};
refined_fit refine_largest_fitting(std::uint64_t best, std::uint64_t hi, std::uint64_t stride,
                                   const std::function<fit_probe(std::uint64_t)>& probe);

// Among given candidate values (ascending; `plan max micro-batch --global-batch`: the micro-batches that divide
// what each data-parallel GPU takes a step), the largest that fits, probing from the top, since the verdict
// need not be monotone; `next` is the candidate above it (what one step more needs). With `name_misses`,
// also the candidates below it that do not fit, until 16 in a row fit.
struct candidate_fit {
  std::optional<std::uint64_t> best, next;
  std::vector<std::uint64_t> misses_below;  // ascending
};
candidate_fit largest_fitting_candidate(const std::vector<std::uint64_t>& ascending,
                                        const std::function<fit_probe(std::uint64_t)>& probe, bool name_misses);

// The divisors of n that are at most `hi`, ascending.
std::vector<std::uint64_t> divisors_up_to(std::uint64_t n, std::uint64_t hi);

// The `count` largest divisors of n below n, descending: n/p for its smallest divisors p >= 2 (1 among them).
// Trial division stops at 2^20, so n near 2^64 costs a millisecond, not an hour: past it only 1 is added.
std::vector<std::uint64_t> largest_proper_divisors(std::uint64_t n, std::size_t count);

}  // namespace trainplan
