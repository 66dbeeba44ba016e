#pragma once
// A simulation of PyTorch's CUDA caching allocator under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
// (c10/cuda/CUDACachingAllocator.cpp: ExpandableSegment, find_expandable_block, try_allocate_expandable_block,
// map_block, unmap_block, should_split, get_free_block; read in the mid-2024 source and checked against
// the newest, whose single-stream behaviour is the same). The rules, with PyTorch's other defaults:
//   - requests round up to 512 bytes and pick a pool as without the option (caching_allocator::round_size;
//     up to 1 MiB: the small pool);
//   - each pool has a segment: a range of virtual addresses, 1.125 times the GPU's memory (rounded up to the
//     granule), whose physical pages are mapped in granules of 2 MiB (small pool) or 20 MiB (large pool) as
//     they are needed; memory_reserved() counts the mapped bytes only;
//   - a request takes the smallest free mapped block that is large enough (the lowest address among equal
//     sizes), except that a free block followed by unmapped space (the segment's free tail) is passed over
//     for the next one in that order when there is one (get_free_block compares sizes plus the unmapped
//     space after them);
//   - with none, the segment grows: at the lowest unmapped range that, with the free block before it,
//     holds the request, the missing bytes are mapped, rounded up to the granule, and merge with that free
//     block; where no range holds it, a new segment is reserved (here: at higher addresses than the others)
//     and the request mapped at its start;
//   - the block is split whenever anything remains (with expandable segments should_split asks only for 512
//     bytes, in both pools);
//   - a freed block merges with free mapped neighbours; nothing is unmapped on free;
//   - when mapping fails (with a capacity: the mapped bytes would pass it), the allocator unmaps every
//     granule no live tensor touches (release_cached_blocks; a segment left with nothing mapped is given
//     back) and tries to grow once more; if that fails too the program runs out of memory, which the
//     simulation records and then serves the request anyway, as caching_allocator does.
// The segment's finite address space matters before any failure: the free block at the end of what is
// mapped counts the unmapped space after it in get_free_block's comparison, so close to 1.125 times the
// GPU's memory that block is no longer passed over.
#include <cstdint>
#include <set>
#include <tuple>
#include <vector>

namespace trainplan {

class expandable_allocator {
 public:
  using handle = std::uint64_t;

  // gpu_total_bytes: the device's memory (totalGlobalMem), from which PyTorch sizes a segment's addresses.
  explicit expandable_allocator(std::uint64_t gpu_total_bytes);
  handle allocate(std::uint64_t bytes);  // bytes > 0
  void free(handle h);

  // The bytes that may be mapped in all (default: unlimited). Set before the first allocation.
  void set_capacity(std::uint64_t bytes) { capacity_ = bytes; }
  bool out_of_memory() const { return out_of_memory_; }
  std::uint64_t cache_releases() const { return cache_releases_; }
  std::uint64_t segments() const { return segments_made_; }  // address ranges reserved, given-back ones included

  std::uint64_t allocated_bytes() const { return allocated_; }  // memory_allocated()
  std::uint64_t reserved_bytes() const { return reserved_; }    // memory_reserved(): mapped bytes
  std::uint64_t peak_allocated_bytes() const { return peak_allocated_; }
  std::uint64_t peak_reserved_bytes() const { return peak_reserved_; }

  static constexpr std::uint64_t small_granule_bytes = 2ull << 20;   // kSmallBuffer
  static constexpr std::uint64_t large_granule_bytes = 20ull << 20;  // kLargeBuffer

 private:
  enum class state : std::uint8_t { allocated, free, unmapped };
  struct block {
    std::uint64_t segment = 0, offset = 0, size = 0;  // segments in address order, offsets within them
    state st = state::unmapped;
    bool small = false;
    std::int64_t prev = -1, next = -1;  // neighbours in the pool's segment (indices into blocks_)
  };
  struct pool_state {
    std::uint64_t granule_bytes = 0;
    std::uint64_t segment_bytes = 0;  // a segment's virtual size
    // (size, segment, offset, index): best fit, the lowest address among equal sizes
    std::set<std::tuple<std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t>> free;
    std::set<std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>> unmapped;  // (segment, offset, index)
  };
  pool_state& pool(bool small) { return small ? small_ : large_; }
  std::uint64_t new_block(const block& b);
  void set_state(std::uint64_t i, state st);  // moves the block between the pool's sets
  std::uint64_t expandable_size(std::uint64_t i) const;
  std::int64_t best_free_block(pool_state& p, std::uint64_t size) const;
  std::int64_t grow(pool_state& p, bool small, std::uint64_t size);  // -1 when a mapping would pass the capacity
  std::int64_t map(pool_state& p, std::uint64_t unmapped_block, std::uint64_t bytes);
  std::uint64_t split_off(std::uint64_t i, std::uint64_t keep, state rest_state);  // the rest's index
  std::uint64_t merge_with_neighbours(std::uint64_t i);  // same-state neighbours; the merged block's index
  void release_cached();  // release_cached_blocks: unmap every granule no allocated block touches

  std::vector<block> blocks_;
  std::vector<std::uint64_t> unused_;
  pool_state small_, large_;
  std::uint64_t allocated_ = 0, reserved_ = 0, peak_allocated_ = 0, peak_reserved_ = 0;
  std::uint64_t capacity_ = ~0ull, cache_releases_ = 0, segments_made_ = 0;
  bool out_of_memory_ = false;
};

}  // namespace trainplan
