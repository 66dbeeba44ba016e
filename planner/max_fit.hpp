#pragma once
// The inverse questions: the longest sequence, the largest micro-batch, the largest model of a family
// that fits a GPU under given settings. Peak memory grows with each of these, so a binary search finds
// the boundary.
#include <cstdint>
#include <functional>
#include <optional>

namespace trainplan {

// The largest v in [lo, hi] with fits(v), assuming fits is true up to some point and false after;
// nullopt when fits(lo) is false.
std::optional<std::uint64_t> largest_fitting(std::uint64_t lo, std::uint64_t hi,
                                             const std::function<bool(std::uint64_t)>& fits);

}  // namespace trainplan
