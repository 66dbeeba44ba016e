#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/device_arena.hpp"

using trainplan::kernels::device_arena;

TEST_CASE("the arena rounds every block to 256 bytes and places them one after another", "[kernels][arena]") {
  device_arena arena(4096);
  CHECK(device_arena::rounded(0) == 256);
  CHECK(device_arena::rounded(1) == 256);
  CHECK(device_arena::rounded(256) == 256);
  CHECK(device_arena::rounded(257) == 512);
  CHECK(arena.allocate(100) == 0u);
  CHECK(arena.allocate(300) == 256u);
  CHECK(arena.live_bytes() == 256 + 512);
  CHECK(arena.extent_bytes() == 768);
  CHECK(arena.largest_free_bytes() == 4096 - 768);
}

TEST_CASE("the arena refuses what does not fit instead of overlapping", "[kernels][arena]") {
  device_arena arena(1024);
  CHECK(arena.allocate(1024) == 0u);
  CHECK_FALSE(arena.allocate(1).has_value());
  arena.release(0);
  CHECK(arena.allocate(1024) == 0u);
  CHECK_FALSE(device_arena(1000).allocate(1000).has_value());  // capacity rounds down to 768
  CHECK_FALSE(arena.allocate(UINT64_MAX).has_value());  // no wrap-around in the rounding
}

TEST_CASE("released neighbours merge so a large block fits again", "[kernels][arena]") {
  device_arena arena(4 * 256);
  const auto a = arena.allocate(256), b = arena.allocate(256), c = arena.allocate(256), d = arena.allocate(256);
  REQUIRE((a && b && c && d));
  CHECK_FALSE(arena.allocate(256).has_value());
  arena.release(*b);
  arena.release(*d);
  CHECK_FALSE(arena.allocate(512).has_value());  // two free ranges of 256, not adjacent
  arena.release(*c);                              // b, c, d now one range
  CHECK(arena.largest_free_bytes() == 768);
  CHECK(arena.allocate(768) == 256u);
  CHECK(arena.extent_bytes() == 1024);
  CHECK_THROWS_AS(arena.release(512), std::logic_error);  // inside a block, not its start
}

TEST_CASE("best fit takes the smallest free range that holds the block", "[kernels][arena]") {
  device_arena arena(10 * 256);
  const auto a = arena.allocate(3 * 256), gap = arena.allocate(256), b = arena.allocate(256), c = arena.allocate(256);
  REQUIRE((a && gap && b && c));
  arena.release(*a);  // a free range of 768 at 0; and 1024 at the end
  arena.release(*b);  // and one of 256 at 1024
  CHECK(arena.allocate(200) == 1024u);  // the 256 range, not the first that fits
  CHECK(arena.allocate(700) == 0u);     // the 768 range rather than the larger tail
}

// The free range at the arena's end is never the best fit while a hole holds the block, however small what
// is left of the arena: taking it would raise the extent while the hole stays empty, so the extent would
// depend on the capacity. (It did: an H100 suite run at 95% of the GPU, tinyllama-1.1b micro-batch 42, reached
// 4.17 GB past its tensors in an arena of 82.75 GB and 0.17 MB past them in a larger one.)
TEST_CASE("a hole that holds the block is taken before the end of the arena, however little is left there",
          "[kernels][arena]") {
  device_arena arena(1000 * 256);
  const auto a = arena.allocate(400 * 256), b = arena.allocate(100 * 256), c = arena.allocate(400 * 256);
  REQUIRE((a && b && c));
  arena.release(*a);  // a hole of 400 units at 0; 100 units left at the end
  CHECK(arena.allocate(100 * 256) == 0u);  // into the hole, not the smaller tail
  CHECK(arena.extent_bytes() == 900 * 256);
  CHECK(arena.allocate(300 * 256) == 100 * 256u);  // what is left of the hole, exactly
  CHECK(arena.allocate(100 * 256) == 900 * 256u);  // no hole holds it now: the end
  CHECK(arena.extent_bytes() == 1000 * 256);
}

TEST_CASE("after random allocations and releases no two live blocks overlap and all space comes back",
          "[kernels][arena]") {
  device_arena arena(1u << 20);
  std::mt19937_64 rng(7);
  struct block {
    std::uint64_t offset, bytes;
  };
  std::vector<block> live;
  std::uint64_t peak_extent = 0;
  for (int i = 0; i < 4000; ++i) {
    if (!live.empty() && (rng() % 3 == 0 || live.size() > 60)) {
      const std::size_t k = rng() % live.size();
      arena.release(live[k].offset);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      const std::uint64_t bytes = 1 + rng() % 40000;
      const auto at = arena.allocate(bytes);
      if (!at) continue;
      CHECK(*at % device_arena::alignment_bytes == 0);
      CHECK(*at + bytes <= arena.capacity_bytes());
      for (const block& other : live) CHECK((*at + bytes <= other.offset || other.offset + other.bytes <= *at));
      live.push_back({*at, bytes});
      peak_extent = std::max(peak_extent, *at + device_arena::rounded(bytes));
    }
    std::uint64_t sum = 0;
    for (const block& b : live) sum += device_arena::rounded(b.bytes);
    REQUIRE(arena.live_bytes() == sum);
    REQUIRE(arena.extent_bytes() >= arena.live_bytes());
  }
  CHECK(arena.peak_extent_bytes() == peak_extent);
  for (const block& b : live) arena.release(b.offset);
  CHECK(arena.live_bytes() == 0);
  CHECK(arena.extent_bytes() == 0);
  CHECK(arena.largest_free_bytes() == arena.capacity_bytes());  // every range merged back into one
}

TEST_CASE("TRAINPLAN_ARENA_BYTES takes a byte count, or whole MiB or GiB, and nothing else", "[kernels][arena]") {
  using trainplan::kernels::parse_arena_bytes;
  CHECK(parse_arena_bytes("4096") == 4096u);
  CHECK(parse_arena_bytes("8G") == 8ull << 30);
  CHECK(parse_arena_bytes("512M") == 512ull << 20);
  CHECK(parse_arena_bytes("18446744073709551615") == UINT64_MAX);
  for (const char* bad : {"", "G", "-1", "+5", "0", "0G", "8GB", "8g", "1.5G", " 8G", "8G ", "18446744073709551616",
                          "17179869184G"})
    CHECK_FALSE(parse_arena_bytes(bad).has_value());
  CHECK_FALSE(parse_arena_bytes(nullptr).has_value());
}
