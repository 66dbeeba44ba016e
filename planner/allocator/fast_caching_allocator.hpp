#pragma once
// PyTorch's default caching allocator at sweep speed: the rules of caching_allocator.hpp (which cites
// c10/cuda/CUDACachingAllocator.cpp), kept as PyTorch keeps them, with no heap allocation per event once its
// vectors have grown. Each pool's free blocks sit in one vector sorted by (size, segment, offset): the best fit
// is a binary search, an insert or erase a move of the entries after it (a pool holds tens to a few hundred
// free blocks in a training step's replay: docs/allocator-speed.md). Blocks are slots of one vector, linked to
// their neighbours in the segment; a merged-away slot is reused.
//
// caching_allocator stays the reference: tests/planner/allocator/test_replay_program.cpp replays every committed
// measurement configuration and 2,000 random ones through both and compares them event by event.
//
// Beyond caching_allocator's interface: each allocation carries an owner tag (the replay's slot), and state()
// writes what decides every later event (the blocks of each segment in address order, with the tag of each
// allocated one, and the counters), so that a replay can tell that a step starts where the previous one started
// (replay_program.hpp's fixed point), and checks() the capacities in which it would have made the same choices.
#include <cstdint>
#include <vector>

#include "planner/allocator/capacity_checks.hpp"
#include "planner/allocator/free_list.hpp"

namespace trainplan {

class fast_caching_allocator {
 public:
  using handle = std::uint32_t;

  handle allocate(std::uint64_t bytes, std::uint32_t owner = 0);  // bytes > 0
  void free(handle h);

  void set_capacity(std::uint64_t bytes) { capacity_ = bytes; }
  bool out_of_memory() const { return out_of_memory_; }
  std::uint64_t cache_releases() const { return cache_releases_; }

  std::uint64_t allocated_bytes() const { return allocated_; }
  std::uint64_t reserved_bytes() const { return reserved_; }
  std::uint64_t peak_allocated_bytes() const { return peak_allocated_; }
  std::uint64_t peak_reserved_bytes() const { return peak_reserved_; }
  std::uint64_t segments() const { return segment_count_; }
  const capacity_checks& checks() const { return checks_; }

  // Everything later events depend on, canonically: the counters, then every live segment, by its rank among
  // the live ones, with its blocks in address order (offset, size, pool, and the owner of an allocated block or
  // a free mark). Two equal states replay the same events identically, down to the segments they make and the
  // cached segments they free. Peaks and the counts of segments made and releases are left out: they only ever
  // take a maximum or grow.
  void state(std::vector<std::uint64_t>& out) const;
  // Its heap storage, about: what a copy of it costs (prefix_checkpoints, replay_program.hpp).
  std::size_t memory_bytes() const {
    return sizeof(*this) + blocks_.capacity() * sizeof(block) + unused_.capacity() * sizeof(std::uint32_t) +
           segment_head_.capacity() * sizeof(std::int32_t) + small_free_.memory_bytes() + large_free_.memory_bytes();
  }

 private:
  struct block {
    std::uint64_t offset = 0, size = 0;
    std::uint32_t segment = 0, owner = 0;
    std::int32_t prev = -1, next = -1;  // neighbours in the segment (indices into blocks_)
    bool small = false, free = true;
  };
  free_list& pool(bool small) { return small ? small_free_ : large_free_; }
  std::uint32_t new_block(const block& b);
  void insert_free(std::uint32_t index);
  void erase_free(std::uint32_t index);
  void release_cached_segments();

  std::vector<block> blocks_;
  std::vector<std::uint32_t> unused_;
  std::vector<std::int32_t> segment_head_;  // by segment: its block at offset 0 (-1 once released)
  free_list small_free_, large_free_;
  std::uint64_t allocated_ = 0, reserved_ = 0, peak_allocated_ = 0, peak_reserved_ = 0, segment_count_ = 0;
  std::uint64_t capacity_ = ~0ull, cache_releases_ = 0;
  bool out_of_memory_ = false;
  capacity_checks checks_;
};

}  // namespace trainplan
