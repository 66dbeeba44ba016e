// Counter-based dropout (dropout.hpp): SplitMix64 (Steele et al. 2014) hashed over (seed, site, index), and the
// mask written from it.
#include "kernels/dropout.hpp"

namespace trainplan::kernels {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double uniform_hash(std::uint64_t seed, std::uint64_t site, std::uint64_t index) {
  const std::uint64_t h = splitmix64(splitmix64(splitmix64(seed) ^ site) ^ index);
  return static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0);  // 53 random bits
}

void dropout_mask(std::uint64_t seed, std::uint64_t site, float p, const view& mask, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) mask.set(i, dropout_keep(seed, site, i, p) ? 1.0f : 0.0f);
}

}  // namespace trainplan::kernels
