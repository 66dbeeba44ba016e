// The simulated allocator under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
// (planner/allocator/expandable_allocator.hpp) on constructed cases, rule by rule as c10/cuda/CUDACachingAllocator.cpp
// states them.
#include <catch2/catch.hpp>

#include "planner/allocator/caching_allocator.hpp"
#include "planner/allocator/expandable_allocator.hpp"

using trainplan::caching_allocator;
using trainplan::expandable_allocator;

namespace {
constexpr std::uint64_t MiB = 1ull << 20;
constexpr std::uint64_t gpu_bytes = 81920 * MiB;  // an 80 GiB GPU: segments of 92,160 MiB of addresses

// Within `capacity`: [0, 40) free and [40, 100) in use, 100 MiB mapped.
void free_block_below_a_live_one(expandable_allocator& a, std::uint64_t capacity) {
  a.set_capacity(capacity);
  const auto low = a.allocate(40 * MiB);
  a.allocate(60 * MiB);
  a.free(low);
  CHECK(a.reserved_bytes() == 100 * MiB);
}
}  // namespace

TEST_CASE("expandable segments map 20 MiB granules for large requests and 2 MiB for small ones", "[allocator][expandable]") {
  expandable_allocator a(gpu_bytes);
  a.allocate(1000);  // small pool: one 2 MiB granule
  CHECK(a.reserved_bytes() == 2 * MiB);
  a.allocate(MiB + 1);  // large pool (1 MiB + 512 after rounding): one 20 MiB granule
  CHECK(a.reserved_bytes() == 22 * MiB);
  a.allocate(25 * MiB);  // 19 MiB - 512 B free at the tail: 6 MiB + 512 B missing, one granule mapped
  CHECK(a.reserved_bytes() == 42 * MiB);
  CHECK(a.allocated_bytes() == 1024 + MiB + 512 + 25 * MiB);
}

TEST_CASE("a free tail grows by the missing bytes, and other free blocks are preferred to it", "[allocator][expandable]") {
  // The walk-through of the source: 30 MiB maps 40; 15 MiB extends the 10 MiB tail by one granule; once the
  // 30 MiB block is free, 12 MiB takes it rather than the 15 MiB tail, whose best fit it would be.
  expandable_allocator a(gpu_bytes);
  const auto first = a.allocate(30 * MiB);
  CHECK(a.reserved_bytes() == 40 * MiB);
  a.allocate(15 * MiB);  // [30, 45), the tail [45, 60)
  CHECK(a.reserved_bytes() == 60 * MiB);
  a.free(first);
  a.allocate(12 * MiB);  // [0, 12): free are [12, 30) and the tail [45, 60)
  a.allocate(15 * MiB);  // the tail is the best fit, but [12, 30) is taken: [12, 27)
  CHECK(a.reserved_bytes() == 60 * MiB);
  // 17 MiB: no free block holds it (the tail has 15, [27, 30) 3), so the tail grows by one granule. Had
  // the 15 MiB gone to the tail, [12, 30) would hold these 17.
  a.allocate(17 * MiB);
  CHECK(a.reserved_bytes() == 80 * MiB);
}

TEST_CASE("with expandable segments any remainder is split off, in both pools", "[allocator][expandable]") {
  expandable_allocator a(gpu_bytes);
  const auto big = a.allocate(100 * MiB);
  a.free(big);
  a.allocate(99 * MiB + 512);  // the caching allocator would hand out the whole 100 MiB block
  CHECK(a.allocated_bytes() == 99 * MiB + 512);
  caching_allocator c;
  c.free(c.allocate(100 * MiB));
  c.allocate(99 * MiB + 512);
  CHECK(c.allocated_bytes() == 100 * MiB);
}

TEST_CASE("freed blocks merge across what was mapped at different times, so a larger tensor reuses them", "[allocator][expandable]") {
  // The caching allocator keeps two 100 MiB segments apart: a 200 MiB tensor takes a third. Under
  // expandable segments they are one mapped range.
  caching_allocator c;
  expandable_allocator e(gpu_bytes);
  auto a = c.allocate(100 * MiB), b = c.allocate(100 * MiB);
  auto x = e.allocate(100 * MiB), y = e.allocate(100 * MiB);
  c.free(a), c.free(b), e.free(x), e.free(y);
  c.allocate(200 * MiB);
  e.allocate(200 * MiB);
  CHECK(c.reserved_bytes() == 400 * MiB);
  CHECK(e.reserved_bytes() == 200 * MiB);
}

TEST_CASE("out of room, the allocator unmaps the granules no tensor touches and grows again, then fails", "[allocator][expandable]") {
  expandable_allocator a(gpu_bytes);
  a.set_capacity(100 * MiB);
  const auto low = a.allocate(60 * MiB);  // [0, 60)
  a.allocate(30 * MiB);                   // [60, 90), the tail [90, 100) free
  CHECK(a.reserved_bytes() == 100 * MiB);
  a.free(low);
  // 70 MiB: no free block holds it; the tail needs 60 MiB more, past the capacity. The release unmaps
  // [0, 60) (whole granules; the tail's [90, 100) holds none). The hole [0, 60) alone cannot hold 70, so
  // the tail grows by 60 MiB: 100 in all, which fits.
  a.allocate(70 * MiB);
  CHECK(a.cache_releases() == 1);
  CHECK_FALSE(a.out_of_memory());
  CHECK(a.reserved_bytes() == 100 * MiB);
  // 50 MiB: nothing is free; the hole [0, 60) holds it but maps 60 MiB, past the capacity, and nothing is
  // left to unmap.
  a.allocate(50 * MiB);
  CHECK(a.cache_releases() == 2);
  CHECK(a.out_of_memory());
  expandable_allocator b(gpu_bytes);
  b.set_capacity(100 * MiB);
  const auto l = b.allocate(60 * MiB);
  b.allocate(30 * MiB);
  b.free(l);
  b.allocate(50 * MiB);  // the free [0, 60) holds it: no mapping at all
  CHECK_FALSE(b.out_of_memory());
  CHECK(b.cache_releases() == 0);
  CHECK(b.reserved_bytes() == 100 * MiB);
}

TEST_CASE("a released hole is mapped again lowest address first", "[allocator][expandable]") {
  expandable_allocator a(gpu_bytes);
  free_block_below_a_live_one(a, 120 * MiB);
  // 45 MiB: the free [0, 40) is too small and growing the tail [100, ...) needs 60 MiB (past 120).
  // The release unmaps [0, 40); the hole [0, 40) with nothing free before it holds 40 < 45, so the tail
  // grows: 45 MiB rounded to 60, at 60 MiB reserved in all: it fits.
  a.allocate(45 * MiB);
  CHECK_FALSE(a.out_of_memory());
  CHECK(a.cache_releases() == 1);
  CHECK(a.reserved_bytes() == 120 * MiB);
  a.allocate(30 * MiB);  // nothing free is large enough: the hole [0, 40) is mapped (40 MiB: past 120)
  CHECK(a.out_of_memory());
}

TEST_CASE("a request into a released hole maps only the granules it needs", "[allocator][expandable]") {
  expandable_allocator a(gpu_bytes);
  free_block_below_a_live_one(a, 140 * MiB);
  a.allocate(50 * MiB);  // tail grows by 60: 160 > 140; release unmaps [0, 40); tail grows: 120 in all
  CHECK(a.cache_releases() == 1);
  CHECK(a.reserved_bytes() == 120 * MiB);
  a.allocate(15 * MiB);  // the tail [150, 160) is 10 MiB; nothing else free: the hole at 0 maps one granule
  CHECK_FALSE(a.out_of_memory());
  CHECK(a.reserved_bytes() == 140 * MiB);
}

TEST_CASE("random programs: counts stay exact, pages whole, and a second pass over freed memory maps nothing", "[allocator][expandable]") {
  // After everything is freed each pool is one free block before its unmapped tail, which the second pass
  // splits exactly where the first pass grew the tail: the same layout, with no page mapped anew.
  std::uint64_t state = 12345;
  int released_and_completed = 0;
  auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull; };
  for (int program = 0; program < 200; ++program) {
    struct op {
      bool free;
      std::uint64_t bytes, which;
    };
    std::vector<op> ops;
    std::uint64_t live = 0;
    for (int i = 0; i < 300; ++i) {
      if (live > 0 && next() % 3 == 0) {
        ops.push_back({true, 0, next() % live});
        --live;
      } else {
        const std::uint64_t r = next();
        const std::uint64_t bytes = r % 4 == 0 ? 1 + (r >> 8) % (1 << 20)        // small pool
                                               : 1 + (r >> 8) % (200ull << 20);  // up to 200 MiB
        ops.push_back({false, bytes, 0});
        ++live;
      }
    }
    // Runs the program on `alloc` (its live tensors left allocated); false when memory_allocated() ever
    // differs from the live requests rounded, or `holds` from true after a step.
    auto run = [&](expandable_allocator& alloc, std::vector<expandable_allocator::handle>& held, auto holds) {
      std::vector<std::uint64_t> rounded;
      std::uint64_t expected = 0;
      bool ok = true;
      for (const op& o : ops) {
        if (o.free) {
          expected -= rounded[o.which];
          alloc.free(held[o.which]);
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(o.which));
          rounded.erase(rounded.begin() + static_cast<std::ptrdiff_t>(o.which));
        } else {
          held.push_back(alloc.allocate(o.bytes));
          rounded.push_back(caching_allocator::round_size(o.bytes));
          expected += rounded.back();
        }
        ok = ok && alloc.allocated_bytes() == expected && holds();
      }
      return ok;
    };
    expandable_allocator a(gpu_bytes);
    auto pages_hold_tensors = [&] { return a.reserved_bytes() >= a.allocated_bytes() && a.reserved_bytes() % (2 * MiB) == 0; };
    std::uint64_t first_peak = 0;
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<expandable_allocator::handle> held;
      CHECK(run(a, held, pages_hold_tensors));
      for (expandable_allocator::handle h : held) a.free(h);
      REQUIRE(a.allocated_bytes() == 0);
      if (pass == 0) first_peak = a.peak_reserved_bytes();
    }
    CHECK(a.peak_reserved_bytes() == first_peak);
    CHECK(a.reserved_bytes() == first_peak);

    // Within a capacity the allocator releases pages and fills holes; until it runs out it never maps past it.
    expandable_allocator limited(gpu_bytes);
    limited.set_capacity(6ull << 30);
    std::vector<expandable_allocator::handle> held;
    CHECK(run(limited, held, [&] { return limited.out_of_memory() || limited.peak_reserved_bytes() <= (6ull << 30); }));
    released_and_completed += limited.cache_releases() > 0 && !limited.out_of_memory();
  }
  CHECK(released_and_completed > 0);  // the release path ran and the program went on
}

TEST_CASE("near the end of a segment's addresses the free tail is no longer passed over", "[allocator][expandable]") {
  // 92,160 MiB of addresses: with 75,040 mapped, the 10 MiB tail counts 17,130 in get_free_block's
  // comparison, less than the 30,000 MiB free block, so 8 MiB takes the tail and 30,000 MiB still fits.
  expandable_allocator a(gpu_bytes);
  const auto first = a.allocate(30000 * MiB);
  a.allocate(20 * MiB);
  a.allocate(45000 * MiB);
  a.allocate(10 * MiB);
  CHECK(a.reserved_bytes() == 75040 * MiB);
  a.free(first);
  a.allocate(8 * MiB);
  a.allocate(30000 * MiB);
  CHECK(a.reserved_bytes() == 75040 * MiB);
}

TEST_CASE("where no unmapped range holds a request, a second segment is reserved", "[allocator][expandable]") {
  // 43,351 MiB then 10 MiB: 43,380 mapped. Freed, the first leaves 48,780 MiB unmapped after 19 free,
  // short of 48,801: a second segment, whose 48,820 MiB pass the 80 GiB. The release unmaps [0, 43,340)
  // (whole granules), the first segment still cannot hold the request, and the second maps it: 48,860 MiB.
  auto program = [](std::uint64_t last_mib) {
    expandable_allocator a(gpu_bytes);
    a.set_capacity(gpu_bytes);
    const auto first = a.allocate(43351 * MiB);
    a.allocate(10 * MiB);
    a.free(first);
    a.allocate(last_mib * MiB);
    return a;
  };
  const expandable_allocator fits = program(48801);
  CHECK(fits.cache_releases() == 1);
  CHECK_FALSE(fits.out_of_memory());
  CHECK(fits.reserved_bytes() == 48860 * MiB);
  CHECK(program(81890).out_of_memory());  // 40 MiB left mapped + 81,900 MiB: past the 81,920
}

TEST_CASE("a request beyond a whole segment gets a segment of its own size", "[allocator][expandable]") {
  expandable_allocator a(gpu_bytes);
  a.allocate(100000 * MiB);  // more than 92,160 MiB of addresses; no capacity: served
  CHECK(a.reserved_bytes() == 100000 * MiB);
  expandable_allocator limited(gpu_bytes);
  limited.set_capacity(gpu_bytes);
  limited.allocate(1ull << 57);  // out of memory, recorded, and served all the same
  CHECK(limited.out_of_memory());
  CHECK(limited.allocated_bytes() == 1ull << 57);
}
