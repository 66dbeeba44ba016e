#pragma once
// A simulation of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp), to predict what it
// reserves from the device for a sequence of allocations and frees: the device-level peak of a PyTorch
// program is its CUDA context plus max_memory_reserved(). The rules, with PyTorch's defaults
// (max_split_size unlimited, no expandable segments, no garbage collection threshold):
//   - a request is rounded up to a multiple of 512 bytes (kMinBlockSize);
//   - requests up to 1 MiB (kSmallSize) use the small pool, larger ones the large pool;
//   - a request takes the smallest free block of its pool that is large enough (best fit; the lowest
//     address among equal sizes);
//   - with none, a new segment is cudaMalloc'd: 2 MiB (kSmallBuffer) for a small request, 20 MiB
//     (kLargeBuffer) for one under 10 MiB (kMinLargeAlloc), else the request rounded up to 2 MiB (kRoundLarge);
//   - the block is split when what remains is at least 512 bytes (small pool) or more than 1 MiB (large
//     pool); otherwise the whole block is handed out, and counted as allocated;
//   - a freed block merges with free neighbours of its segment; segments are never returned to the device,
//     unless cudaMalloc fails: then the allocator frees every cached segment no tensor uses (a free block
//     that is its whole segment: release_cached_blocks) and tries once more; if that fails too, the
//     program runs out of memory. (release_available_cached_blocks, tried first, does nothing unless
//     max_split_size is set.) With a capacity (what cudaMalloc can still hand out: the GPU's memory less
//     the CUDA context and other fixed allocations), the simulation does the same; a request that still
//     does not fit is recorded as out of memory (the program stops there) and served anyway: from then on
//     the capacity no longer applies.
#include <cstdint>
#include <map>
#include <set>
#include <vector>

namespace trainplan {

class caching_allocator {
 public:
  using handle = std::uint64_t;

  handle allocate(std::uint64_t bytes);  // bytes > 0
  void free(handle h);

  // The bytes segments may take in all (default: unlimited). Set before the first allocation.
  void set_capacity(std::uint64_t bytes) { capacity_ = bytes; }
  bool out_of_memory() const { return out_of_memory_; }
  std::uint64_t cache_releases() const { return cache_releases_; }  // release_cached_blocks calls before that

  std::uint64_t allocated_bytes() const { return allocated_; }        // memory_allocated()
  std::uint64_t reserved_bytes() const { return reserved_; }          // memory_reserved()
  std::uint64_t peak_allocated_bytes() const { return peak_allocated_; }
  std::uint64_t peak_reserved_bytes() const { return peak_reserved_; }
  std::uint64_t segments() const { return segment_count_; }  // cudaMalloc calls: released segments included

  static std::uint64_t round_size(std::uint64_t bytes);
  static bool small_pool(std::uint64_t bytes);  // a request of at most kSmallSize (1 MiB), rounded: the small pool
  static std::uint64_t segment_size(std::uint64_t rounded);

 private:
  struct block {
    std::uint64_t segment = 0, offset = 0, size = 0;
    bool small = false, free = true;
    std::int64_t prev = -1, next = -1;  // neighbours in the segment (indices into blocks_)
  };
  // Free blocks of a pool ordered by (size, segment, offset): the best fit is the first not smaller.
  using free_key = std::tuple<std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t>;  // size, segment, offset, index
  std::set<free_key>& pool(bool small) { return small ? small_free_ : large_free_; }
  std::uint64_t new_block(const block& b);  // a slot for b: a merged-away one, or a new one
  void insert_free(std::uint64_t index);
  void erase_free(std::uint64_t index);
  void release_cached_segments();  // release_cached_blocks: every free block that is a whole segment

  std::vector<block> blocks_;
  std::vector<std::uint64_t> unused_;  // indices of merged-away blocks, reused
  std::set<free_key> small_free_, large_free_;
  std::uint64_t allocated_ = 0, reserved_ = 0, peak_allocated_ = 0, peak_reserved_ = 0, segment_count_ = 0;
  std::uint64_t capacity_ = ~0ull, cache_releases_ = 0;
  bool out_of_memory_ = false;
};

}  // namespace trainplan
