// fast_expandable_allocator (planner/allocator/fast_expandable_allocator.hpp) against the reference,
// expandable_allocator, driven by the same random requests and frees: the same allocated, mapped and segment
// counts after every call, the same peaks, cache releases and failures. Small GPUs make the cases a replay of a
// real model rarely reaches: several segments of addresses, a free tail close to the segment's end (where
// get_free_block no longer passes it over), mapping refused by a capacity, granules unmapped and segments given
// back by release_cached_blocks, and requests larger than a segment.
#include <catch2/catch.hpp>

#include <random>
#include <utility>
#include <vector>

#include "planner/allocator/expandable_allocator.hpp"
#include "planner/allocator/fast_expandable_allocator.hpp"

using trainplan::expandable_allocator;
using trainplan::fast_expandable_allocator;

namespace {

constexpr std::uint64_t MiB = 1ull << 20;

struct counts {
  std::uint64_t calls = 0, releases = 0, failures = 0, segments = 0;
};

// `calls` random allocations and frees through both allocators, compared after each.
void drive_both(std::uint64_t seed, std::uint64_t gpu_bytes, std::uint64_t capacity_bytes, int calls, counts& seen) {
  std::mt19937_64 rng(seed);
  expandable_allocator reference(gpu_bytes);
  fast_expandable_allocator fast(gpu_bytes);
  reference.set_capacity(capacity_bytes);
  fast.set_capacity(capacity_bytes);
  std::vector<std::pair<expandable_allocator::handle, fast_expandable_allocator::handle>> live;
  for (int n = 0; n < calls; ++n) {
    // Mostly allocations below a live count the seed picks, mostly frees above it.
    if (live.empty() || rng() % 100 < (live.size() < 4 + seed % 20 ? 70u : 30u)) {
      // Sizes from a few repeated values (ties in the free lists), small-pool ones, and any up to a quarter of the GPU.
      const std::uint64_t pick = rng() % 10;
      const std::uint64_t bytes = pick < 3   ? MiB * (1 + rng() % 4) * 5
                                  : pick < 6 ? 1 + rng() % (2 * MiB)
                                             : 1 + rng() % (gpu_bytes / 4);
      live.emplace_back(reference.allocate(bytes), fast.allocate(bytes));
    } else {
      const std::size_t k = static_cast<std::size_t>(rng() % live.size());
      reference.free(live[k].first);
      fast.free(live[k].second);
      live[k] = live.back();
      live.pop_back();
    }
    INFO("seed " << seed << ", call " << n);
    REQUIRE(fast.allocated_bytes() == reference.allocated_bytes());
    REQUIRE(fast.reserved_bytes() == reference.reserved_bytes());
    REQUIRE(fast.segments() == reference.segments());
    REQUIRE(fast.out_of_memory() == reference.out_of_memory());
    REQUIRE(fast.cache_releases() == reference.cache_releases());
    REQUIRE(fast.peak_allocated_bytes() == reference.peak_allocated_bytes());
    REQUIRE(fast.peak_reserved_bytes() == reference.peak_reserved_bytes());
  }
  ++seen.calls;
  seen.releases += reference.cache_releases() > 0;
  seen.failures += reference.out_of_memory();
  seen.segments += reference.segments() > 2;
}

}  // namespace

TEST_CASE("fast expandable segments: random requests as the reference, call by call, on small GPUs", "[allocator][expandable]") {
  counts seen;
  for (std::uint64_t seed = 0; seed < 120; ++seed) {
    const std::uint64_t gpu_bytes = (64 + 64 * (seed % 5)) * MiB;  // segments of 72 to 360 MiB of addresses
    // No limit, or a capacity around what the live blocks need, so that mapping fails, the cache is unmapped and
    // the program goes on or runs out.
    const std::uint64_t capacity = seed % 4 == 0 ? ~0ull : seed % 4 == 1 ? gpu_bytes / 2 : gpu_bytes * (2 + seed % 5) / 2;
    drive_both(seed, gpu_bytes, capacity, 600, seen);
  }
  // The cases exist: every run compared, and among them releases, failures and more segments than one a pool.
  CHECK(seen.calls == 120);
  CHECK(seen.releases > 10);
  CHECK(seen.failures > 10);
  CHECK(seen.segments > 10);
}
