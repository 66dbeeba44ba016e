// The simulated PyTorch caching allocator (planner/caching_allocator.hpp) on constructed cases, rule by
// rule as c10/cuda/CUDACachingAllocator.cpp states them.
#include <catch2/catch.hpp>

#include "planner/caching_allocator.hpp"

using trainplan::caching_allocator;

namespace {
constexpr std::uint64_t MiB = 1ull << 20;
}

TEST_CASE("requests round to 512 bytes, segments are 2 MiB, 20 MiB or the request rounded to 2 MiB", "[allocator]") {
  CHECK(caching_allocator::round_size(1) == 512);
  CHECK(caching_allocator::round_size(513) == 1024);
  CHECK(caching_allocator::segment_size(512) == 2 * MiB);          // small pool
  CHECK(caching_allocator::segment_size(MiB) == 2 * MiB);          // 1 MiB is still small
  CHECK(caching_allocator::segment_size(MiB + 512) == 20 * MiB);   // under 10 MiB: a 20 MiB segment
  CHECK(caching_allocator::segment_size(10 * MiB) == 10 * MiB);    // from 10 MiB: rounded to 2 MiB
  CHECK(caching_allocator::segment_size(11 * MiB) == 12 * MiB);
}

TEST_CASE("small requests share a 2 MiB segment, medium ones a 20 MiB segment", "[allocator]") {
  caching_allocator a;
  for (int i = 0; i < 4; ++i) a.allocate(1000);  // 1024 bytes each
  CHECK(a.reserved_bytes() == 2 * MiB);
  CHECK(a.allocated_bytes() == 4 * 1024);
  a.allocate(3 * MiB);
  a.allocate(3 * MiB);
  CHECK(a.reserved_bytes() == 22 * MiB);  // both 3 MiB blocks come out of one 20 MiB segment
  CHECK(a.segments() == 2);
}

TEST_CASE("a large block is split only when more than 1 MiB would remain, and counts whole otherwise", "[allocator]") {
  caching_allocator a;
  const auto big = a.allocate(100 * MiB);
  a.free(big);
  a.allocate(99 * MiB + 512);  // 512 KiB would remain: not split, the whole block is allocated
  CHECK(a.allocated_bytes() == 100 * MiB);
  CHECK(a.reserved_bytes() == 100 * MiB);
  caching_allocator b;
  b.free(b.allocate(100 * MiB));
  b.allocate(50 * MiB);  // 50 MiB remain: split
  CHECK(b.allocated_bytes() == 50 * MiB);
  b.allocate(50 * MiB);  // the remainder serves the next request: no new segment
  CHECK(b.reserved_bytes() == 100 * MiB);
}

TEST_CASE("best fit takes the smallest free block that is large enough", "[allocator]") {
  caching_allocator a;
  const auto b40 = a.allocate(40 * MiB), b20 = a.allocate(20 * MiB), b60 = a.allocate(60 * MiB);
  a.free(b40), a.free(b20), a.free(b60);
  a.allocate(18 * MiB);  // fits in the 20 MiB block (2 MiB remain: split) rather than the others
  a.allocate(39 * MiB);  // the 40 MiB block
  a.allocate(59 * MiB);  // the 60 MiB block
  CHECK(a.reserved_bytes() == 120 * MiB);
  a.allocate(30 * MiB);  // nothing free is large enough: a new segment
  CHECK(a.reserved_bytes() == 150 * MiB);
}

TEST_CASE("freed neighbours merge, and segments are never given back", "[allocator]") {
  caching_allocator a;
  a.free(a.allocate(100 * MiB));
  const auto x = a.allocate(30 * MiB), y = a.allocate(30 * MiB), z = a.allocate(30 * MiB);
  a.free(x), a.free(z), a.free(y);  // y merges with both neighbours (and the 10 MiB tail)
  CHECK(a.allocated_bytes() == 0);
  a.allocate(100 * MiB);            // the whole segment again
  CHECK(a.reserved_bytes() == 100 * MiB);
  CHECK(a.peak_reserved_bytes() == 100 * MiB);
  CHECK(a.peak_allocated_bytes() == 100 * MiB);
}
