#pragma once
// Dropout with counter-based randomness: whether element i of dropout site `site` is kept is a pure
// function of (seed, site, i) (a SplitMix64 hash, Steele et al. 2014). Eager attention stores the mask
// (1 byte per element, as the planner counts it); flash attention and recomputation regenerate it.
#include <cstddef>
#include <cstdint>

#include "kernels/view.hpp"

namespace trainplan::kernels {

std::uint64_t splitmix64(std::uint64_t x);

// Uniform in [0, 1) from (seed, site, index).
double uniform_hash(std::uint64_t seed, std::uint64_t site, std::uint64_t index);

inline bool dropout_keep(std::uint64_t seed, std::uint64_t site, std::uint64_t index, float p) {
  return p <= 0.0f || uniform_hash(seed, site, index) >= p;
}

// mask[i] = 1 if kept else 0.
void dropout_mask(std::uint64_t seed, std::uint64_t site, float p, const view& mask, std::size_t n);

}  // namespace trainplan::kernels
