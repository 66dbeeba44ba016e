// The simulated caching allocator (caching_allocator.hpp, whose rules cite CUDACachingAllocator.cpp): request
// and segment sizes, best fit in the small and large pools, splitting and merging blocks, and the unused cached
// segments freed when the device would run out.
#include "planner/allocator/caching_allocator.hpp"

#include <tuple>

#include "planner/util/checked_math.hpp"

namespace trainplan {
namespace {

constexpr std::uint64_t min_block = 512;                // kMinBlockSize
constexpr std::uint64_t small_size = 1ull << 20;        // kSmallSize
constexpr std::uint64_t small_buffer = 2ull << 20;      // kSmallBuffer
constexpr std::uint64_t large_buffer = 20ull << 20;     // kLargeBuffer
constexpr std::uint64_t min_large_alloc = 10ull << 20;  // kMinLargeAlloc
constexpr std::uint64_t round_large = 2ull << 20;       // kRoundLarge

}  // namespace

std::uint64_t caching_allocator::round_size(std::uint64_t bytes) {
  if (bytes < min_block) return min_block;
  return checked_mul(min_block, (bytes + min_block - 1) / min_block, "allocation");
}

bool caching_allocator::small_pool(std::uint64_t bytes) { return round_size(bytes) <= small_size; }

std::uint64_t caching_allocator::segment_size(std::uint64_t rounded) {
  if (rounded <= small_size) return small_buffer;
  if (rounded < min_large_alloc) return large_buffer;
  return checked_mul(round_large, (rounded + round_large - 1) / round_large, "segment");
}

std::uint64_t caching_allocator::new_block(const block& b) {
  if (unused_.empty()) {
    blocks_.push_back(b);
    return blocks_.size() - 1;
  }
  const std::uint64_t index = unused_.back();
  unused_.pop_back();
  blocks_[index] = b;
  return index;
}

void caching_allocator::insert_free(std::uint64_t i) {
  const block& b = blocks_[i];
  pool(b.small).insert({b.size, b.segment, b.offset, i});
}

void caching_allocator::erase_free(std::uint64_t i) {
  const block& b = blocks_[i];
  pool(b.small).erase({b.size, b.segment, b.offset, i});
}

void caching_allocator::release_cached_segments() {
  ++cache_releases_;
  for (std::set<free_key>* blocks : {&small_free_, &large_free_})
    for (auto it = blocks->begin(); it != blocks->end();) {
      const std::uint64_t i = std::get<3>(*it);
      if (blocks_[i].prev >= 0 || blocks_[i].next >= 0) {  // part of a segment still in use
        ++it;
        continue;
      }
      reserved_ -= blocks_[i].size;
      unused_.push_back(i);
      it = blocks->erase(it);
    }
}

caching_allocator::handle caching_allocator::allocate(std::uint64_t bytes) {
  const std::uint64_t size = round_size(bytes);
  const bool small = small_pool(bytes);
  std::set<free_key>& free_blocks = pool(small);
  auto it = free_blocks.lower_bound({size, 0, 0, 0});
  std::uint64_t index;
  if (it != free_blocks.end()) {
    index = std::get<3>(*it);
    free_blocks.erase(it);
  } else {
    const std::uint64_t seg = segment_size(size);
    auto over_capacity = [&] { return seg > capacity_ || reserved_ > capacity_ - seg; };
    if (!out_of_memory_ && over_capacity()) {  // cudaMalloc fails: free the unused cached segments, try again
      release_cached_segments();
      out_of_memory_ = over_capacity();
    }
    reserved_ = checked_add(reserved_, seg, "reserved bytes");
    peak_reserved_ = std::max(peak_reserved_, reserved_);
    block b;
    b.segment = segment_count_++;
    b.size = seg;
    b.small = small;
    index = new_block(b);
  }
  const std::uint64_t remaining = blocks_[index].size - size;
  if (small ? remaining >= min_block : remaining > small_size) {
    block rest;
    rest.segment = blocks_[index].segment;
    rest.offset = blocks_[index].offset + size;
    rest.size = remaining;
    rest.small = small;
    rest.prev = static_cast<std::int64_t>(index);
    rest.next = blocks_[index].next;
    const std::uint64_t r = new_block(rest);
    if (rest.next >= 0) blocks_[static_cast<std::uint64_t>(rest.next)].prev = static_cast<std::int64_t>(r);
    blocks_[index].next = static_cast<std::int64_t>(r);
    blocks_[index].size = size;
    insert_free(r);
  }
  blocks_[index].free = false;
  allocated_ += blocks_[index].size;
  peak_allocated_ = std::max(peak_allocated_, allocated_);
  return index;
}

void caching_allocator::free(handle h) {
  block& b = blocks_[h];
  allocated_ -= b.size;
  b.free = true;
  // Merge with free neighbours in the segment (try_merge_blocks).
  auto merge_next = [this](std::uint64_t i) {
    const std::int64_t n = blocks_[i].next;
    if (n < 0 || !blocks_[static_cast<std::uint64_t>(n)].free) return;
    const std::uint64_t next = static_cast<std::uint64_t>(n);
    erase_free(next);
    blocks_[i].size += blocks_[next].size;
    blocks_[i].next = blocks_[next].next;
    if (blocks_[i].next >= 0) blocks_[static_cast<std::uint64_t>(blocks_[i].next)].prev = static_cast<std::int64_t>(i);
    unused_.push_back(next);
  };
  merge_next(h);
  std::uint64_t keep = h;
  const std::int64_t p = blocks_[h].prev;
  if (p >= 0 && blocks_[static_cast<std::uint64_t>(p)].free) {
    keep = static_cast<std::uint64_t>(p);
    erase_free(keep);
    merge_next(keep);
  }
  insert_free(keep);
}

}  // namespace trainplan
