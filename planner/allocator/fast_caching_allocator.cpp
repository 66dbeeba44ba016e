// The caching allocator at sweep speed (fast_caching_allocator.hpp): caching_allocator's rules step for step,
// with each pool's free blocks in a free_list (short sorted runs) instead of a std::set (whose node per insert
// was a third of a replay's time: docs/allocator-speed.md).
#include "planner/allocator/fast_caching_allocator.hpp"

#include <algorithm>

#include "planner/allocator/caching_allocator.hpp"
#include "planner/util/checked_math.hpp"

namespace trainplan {
namespace {

constexpr std::uint64_t min_block = 512;          // kMinBlockSize
constexpr std::uint64_t small_size = 1ull << 20;  // kSmallSize

}  // namespace

std::uint32_t fast_caching_allocator::new_block(const block& b) {
  if (unused_.empty()) {
    blocks_.push_back(b);
    return static_cast<std::uint32_t>(blocks_.size() - 1);
  }
  const std::uint32_t index = unused_.back();
  unused_.pop_back();
  blocks_[index] = b;
  return index;
}

void fast_caching_allocator::insert_free(std::uint32_t i) {
  const block& b = blocks_[i];
  pool(b.small).insert({b.size, b.offset, b.segment, i});
}

void fast_caching_allocator::erase_free(std::uint32_t i) {
  const block& b = blocks_[i];
  pool(b.small).erase({b.size, b.offset, b.segment, i});
}

void fast_caching_allocator::release_cached_segments() {
  ++cache_releases_;
  for (free_list* list : {&small_free_, &large_free_})
    list->keep_only([this](const free_list::entry& e) {
      const block& b = blocks_[e.index];
      if (b.prev >= 0 || b.next >= 0) return true;  // part of a segment still in use
      reserved_ -= b.size;
      segment_head_[b.segment] = -1;
      unused_.push_back(e.index);
      return false;
    });
}

fast_caching_allocator::handle fast_caching_allocator::allocate(std::uint64_t bytes, std::uint32_t owner) {
  const std::uint64_t size = caching_allocator::round_size(bytes);
  const bool small = size <= small_size;
  std::uint32_t index;
  if (free_list::entry best; pool(small).take_best_fit(size, best)) {
    index = best.index;
  } else {
    const std::uint64_t seg = caching_allocator::segment_size(size);
    auto over_capacity = [&] { return seg > capacity_ || reserved_ > capacity_ - seg; };
    const bool checked = !out_of_memory_;
    if (checked && over_capacity()) {  // cudaMalloc fails: free the unused cached segments, try again
      checks_.failed(reserved_, seg);
      release_cached_segments();
      out_of_memory_ = over_capacity();
      if (out_of_memory_) checks_.failed(reserved_, seg);
    }
    reserved_ = checked_add(reserved_, seg, "reserved bytes");
    if (checked && !out_of_memory_) checks_.passed(reserved_);
    peak_reserved_ = std::max(peak_reserved_, reserved_);
    block b;
    b.segment = static_cast<std::uint32_t>(segment_count_++);
    b.size = seg;
    b.small = small;
    index = new_block(b);
    segment_head_.push_back(static_cast<std::int32_t>(index));
  }
  block& taken = blocks_[index];
  const std::uint64_t remaining = taken.size - size;
  if (small ? remaining >= min_block : remaining > small_size) {
    block rest;
    rest.segment = taken.segment;
    rest.offset = taken.offset + size;
    rest.size = remaining;
    rest.small = small;
    rest.prev = static_cast<std::int32_t>(index);
    rest.next = taken.next;
    taken.size = size;  // before new_block: it may move blocks_
    const std::uint32_t r = new_block(rest);
    if (rest.next >= 0) blocks_[static_cast<std::uint32_t>(rest.next)].prev = static_cast<std::int32_t>(r);
    blocks_[index].next = static_cast<std::int32_t>(r);
    insert_free(r);
  }
  block& b = blocks_[index];
  b.free = false;
  b.owner = owner;
  allocated_ += b.size;
  peak_allocated_ = std::max(peak_allocated_, allocated_);
  return index;
}

void fast_caching_allocator::free(handle i) {
  allocated_ -= blocks_[i].size;
  blocks_[i].free = true;
  // Merge with free neighbours in the segment (try_merge_blocks): the next one into this, this into the previous.
  auto absorb_next = [this](std::uint32_t into) {
    const std::uint32_t next = static_cast<std::uint32_t>(blocks_[into].next);
    blocks_[into].size += blocks_[next].size;
    blocks_[into].next = blocks_[next].next;
    if (blocks_[into].next >= 0) blocks_[static_cast<std::uint32_t>(blocks_[into].next)].prev = static_cast<std::int32_t>(into);
    unused_.push_back(next);
  };
  const std::int32_t n = blocks_[i].next;
  if (n >= 0 && blocks_[static_cast<std::uint32_t>(n)].free) {
    erase_free(static_cast<std::uint32_t>(n));
    absorb_next(i);
  }
  std::uint32_t keep = i;
  const std::int32_t p = blocks_[i].prev;
  if (p >= 0 && blocks_[static_cast<std::uint32_t>(p)].free) {
    keep = static_cast<std::uint32_t>(p);
    erase_free(keep);
    absorb_next(keep);
  }
  insert_free(keep);
}

void fast_caching_allocator::state(std::vector<std::uint64_t>& out) const {
  out.clear();
  out.insert(out.end(), {allocated_, reserved_, out_of_memory_ ? 1ull : 0ull});
  // A segment by its rank among the live ones: the pools order blocks by segment number, and a new segment's
  // number passes every live one's, so only their order decides an event, not the numbers themselves.
  std::uint64_t rank = 0;
  for (std::uint64_t s = 0; s < segment_head_.size(); ++s) {
    if (segment_head_[s] < 0) continue;
    out.push_back(rank++);
    for (std::int32_t i = segment_head_[s]; i >= 0; i = blocks_[static_cast<std::uint32_t>(i)].next) {
      const block& b = blocks_[static_cast<std::uint32_t>(i)];
      out.insert(out.end(), {b.offset, b.size, (b.small ? 2ull : 0ull) | (b.free ? 1ull : 0ull), b.free ? 0ull : b.owner});
    }
  }
}

}  // namespace trainplan
