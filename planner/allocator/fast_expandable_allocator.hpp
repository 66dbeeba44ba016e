#pragma once
// PyTorch's caching allocator under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True at sweep speed: the rules
// of expandable_allocator.hpp (which cites c10/cuda/CUDACachingAllocator.cpp: ExpandableSegment,
// get_free_block, try_allocate_expandable_block, map_block, release_cached_blocks) step for step, on the flat
// structures of fast_caching_allocator: each pool's free mapped blocks in a free_list (short sorted runs in
// (size, segment, offset) order), its unmapped ranges in one vector in address order (a handful: a segment's
// tail, and the holes a cache release leaves), blocks as slots of one vector linked to their neighbours. No
// heap allocation per event once the vectors have grown, where the reference's std::sets made a node per
// insert and re-filed a block at each change of state (a quarter of an all-lever search's time:
// docs/allocator-speed.md).
//
// expandable_allocator stays the reference: tests/planner/allocator/test_fast_expandable_allocator.cpp drives
// both with random requests, and test_replay_program.cpp replays every committed measurement configuration and
// 2,000 random ones through both, comparing them event by event.
#include <cstdint>
#include <vector>

#include "planner/allocator/capacity_checks.hpp"
#include "planner/allocator/free_list.hpp"

namespace trainplan {

class fast_expandable_allocator {
 public:
  using handle = std::uint32_t;

  // gpu_total_bytes: the device's memory (totalGlobalMem), from which PyTorch sizes a segment's addresses.
  explicit fast_expandable_allocator(std::uint64_t gpu_total_bytes);
  handle allocate(std::uint64_t bytes, std::uint32_t owner = 0);  // bytes > 0; owner: the replay's slot
  void free(handle h);

  void set_capacity(std::uint64_t bytes) { capacity_ = bytes; }  // mapped bytes in all; before the first allocation
  bool out_of_memory() const { return out_of_memory_; }
  std::uint64_t cache_releases() const { return cache_releases_; }
  std::uint64_t segments() const { return segments_made_; }  // address ranges reserved, given-back ones included

  std::uint64_t allocated_bytes() const { return allocated_; }
  std::uint64_t reserved_bytes() const { return reserved_; }  // mapped bytes
  std::uint64_t peak_allocated_bytes() const { return peak_allocated_; }
  std::uint64_t peak_reserved_bytes() const { return peak_reserved_; }
  const capacity_checks& checks() const { return checks_; }

  // Everything later events depend on, canonically, as fast_caching_allocator::state: the counters, then every
  // live segment by its rank among the live ones, with its blocks in address order (offset, size, pool and
  // state, and an allocated block's owner). The unmapped ranges and free lists follow from the blocks; which
  // slot of blocks_ a block has decides nothing. For the fixed point (replay_program.cpp).
  void state(std::vector<std::uint64_t>& out) const;
  // Its heap storage, about: what a copy of it costs (prefix_checkpoints, replay_program.hpp).
  std::size_t memory_bytes() const {
    return sizeof(*this) + blocks_.capacity() * sizeof(block) + unused_.capacity() * sizeof(std::uint32_t) +
           scratch_.capacity() * sizeof(std::uint32_t) + small_.free.memory_bytes() + large_.free.memory_bytes() +
           (small_.unmapped.capacity() + large_.unmapped.capacity()) * sizeof(unmapped_range);
  }

 private:
  enum class block_state : std::uint8_t { allocated, free, unmapped };
  struct block {
    std::uint64_t offset = 0, size = 0;  // offsets within the segment
    std::uint32_t segment = 0;           // segments in address order
    std::int32_t prev = -1, next = -1;   // neighbours in the segment (indices into blocks_)
    std::uint32_t owner = 0;             // an allocated block's, as allocate() was told
    block_state st = block_state::unmapped;
    bool small = false;
  };
  struct unmapped_range {
    std::uint32_t segment = 0, index = 0;
    std::uint64_t offset = 0;
  };
  struct pool_state {
    std::uint64_t granule_bytes = 0, segment_bytes = 0;
    free_list free;                        // free mapped blocks: best fit, the lowest address among equal sizes
    std::vector<unmapped_range> unmapped;  // by (segment, offset)
  };
  pool_state& pool(bool small) { return small ? small_ : large_; }
  std::uint32_t new_block(const block& b);
  std::uint32_t split(std::uint32_t i, std::uint64_t keep, block_state rest_state);  // the rest's slot; files neither
  void absorb_next(std::uint32_t into);                                       // files neither
  void insert_free(std::uint32_t i);
  void erase_free(std::uint32_t i);
  std::size_t unmapped_at(const pool_state& p, std::uint32_t i) const;  // i's place in p.unmapped
  std::uint64_t expandable_size(std::uint32_t i) const;
  std::int64_t take_free_block(pool_state& p, std::uint64_t size);
  std::int64_t map(pool_state& p, std::uint32_t unmapped_block, std::uint64_t bytes);
  std::int64_t grow(pool_state& p, bool small, std::uint64_t size);
  void release_cached();

  std::vector<block> blocks_;
  std::vector<std::uint32_t> unused_;
  std::vector<std::uint32_t> scratch_;  // release_cached's list of free blocks
  pool_state small_, large_;
  std::uint64_t allocated_ = 0, reserved_ = 0, peak_allocated_ = 0, peak_reserved_ = 0;
  std::uint64_t capacity_ = ~0ull, cache_releases_ = 0, segments_made_ = 0;
  bool out_of_memory_ = false;
  capacity_checks checks_;
};

}  // namespace trainplan
