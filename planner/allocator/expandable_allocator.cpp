// The simulated expandable-segments allocator (expandable_allocator.hpp, whose rules cite
// CUDACachingAllocator.cpp): each pool's segment a range of addresses whose pages are mapped in granules as
// needed, blocks split and merged within it, and the free block chosen as get_free_block chooses it.
#include "planner/allocator/expandable_allocator.hpp"

#include <algorithm>
#include <iterator>

#include "planner/allocator/caching_allocator.hpp"
#include "planner/util/checked_math.hpp"

namespace trainplan {
namespace {

constexpr std::uint64_t small_size = 1ull << 20;  // kSmallSize: the small pool's largest request
constexpr std::uint64_t min_block = 512;          // kMinBlockSize

std::uint64_t round_up(std::uint64_t bytes, std::uint64_t granule) {
  return checked_mul((bytes + granule - 1) / granule, granule, "expandable segment");
}

}  // namespace

// ExpandableSegment's constructor: the device's memory and an eighth more, in whole granules.
expandable_allocator::expandable_allocator(std::uint64_t gpu_total_bytes) {
  small_.granule_bytes = small_granule_bytes;
  large_.granule_bytes = large_granule_bytes;
  for (pool_state* p : {&small_, &large_})
    p->segment_bytes = std::max(p->granule_bytes, round_up(checked_add(gpu_total_bytes, gpu_total_bytes / 8, "GPU memory"),
                                                           p->granule_bytes));
}

std::uint64_t expandable_allocator::new_block(const block& b) {
  if (unused_.empty()) {
    blocks_.push_back(b);
    return blocks_.size() - 1;
  }
  const std::uint64_t i = unused_.back();
  unused_.pop_back();
  blocks_[i] = b;
  return i;
}

void expandable_allocator::set_state(std::uint64_t i, state st) {
  block& b = blocks_[i];
  pool_state& p = pool(b.small);
  if (b.st == state::free) p.free.erase({b.size, b.segment, b.offset, i});
  if (b.st == state::unmapped) p.unmapped.erase({b.segment, b.offset, i});
  b.st = st;
  if (st == state::free) p.free.insert({b.size, b.segment, b.offset, i});
  if (st == state::unmapped) p.unmapped.insert({b.segment, b.offset, i});
}

// A block's size plus the unmapped space right after it: what get_free_block compares.
std::uint64_t expandable_allocator::expandable_size(std::uint64_t i) const {
  const block& b = blocks_[i];
  if (b.next >= 0 && blocks_[static_cast<std::uint64_t>(b.next)].st == state::unmapped)
    return b.size + blocks_[static_cast<std::uint64_t>(b.next)].size;
  return b.size;
}

// The smallest free block that holds `size`, stepping past it to the next in (size, address) order while
// that one's expandable size is strictly smaller: the free tail is taken only when nothing else fits.
std::int64_t expandable_allocator::best_free_block(pool_state& p, std::uint64_t size) const {
  auto it = p.free.lower_bound({size, 0, 0, 0});
  if (it == p.free.end()) return -1;
  for (auto next = std::next(it); next != p.free.end(); it = next++)
    if (expandable_size(std::get<3>(*next)) >= expandable_size(std::get<3>(*it))) break;
  return static_cast<std::int64_t>(std::get<3>(*it));
}

// Splits block i after `keep` bytes; the rest (same pool, `rest_state`) follows it in the segment.
std::uint64_t expandable_allocator::split_off(std::uint64_t i, std::uint64_t keep, state rest_state) {
  block rest;
  rest.segment = blocks_[i].segment;
  rest.offset = blocks_[i].offset + keep;
  rest.size = blocks_[i].size - keep;
  rest.small = blocks_[i].small;
  rest.st = rest_state;
  rest.prev = static_cast<std::int64_t>(i);
  rest.next = blocks_[i].next;
  const state st = blocks_[i].st;
  set_state(i, state::allocated);  // out of the pool's sets while its size changes
  blocks_[i].size = keep;
  rest.st = state::allocated;
  const std::uint64_t r = new_block(rest);
  if (rest.next >= 0) blocks_[static_cast<std::uint64_t>(rest.next)].prev = static_cast<std::int64_t>(r);
  blocks_[i].next = static_cast<std::int64_t>(r);
  set_state(i, st);
  set_state(r, rest_state);
  return r;
}

std::uint64_t expandable_allocator::merge_with_neighbours(std::uint64_t i) {
  const state st = blocks_[i].st;
  auto absorb_next = [&](std::uint64_t into) {
    const std::uint64_t n = static_cast<std::uint64_t>(blocks_[into].next);
    set_state(n, state::allocated);
    set_state(into, state::allocated);
    blocks_[into].size += blocks_[n].size;
    blocks_[into].next = blocks_[n].next;
    if (blocks_[into].next >= 0) blocks_[static_cast<std::uint64_t>(blocks_[into].next)].prev = static_cast<std::int64_t>(into);
    unused_.push_back(n);
    set_state(into, st);
  };
  if (blocks_[i].next >= 0 && blocks_[static_cast<std::uint64_t>(blocks_[i].next)].st == st) absorb_next(i);
  if (blocks_[i].prev >= 0 && blocks_[static_cast<std::uint64_t>(blocks_[i].prev)].st == st) {
    i = static_cast<std::uint64_t>(blocks_[i].prev);
    absorb_next(i);
  }
  return i;
}

// map_block: maps the first `bytes` of an unmapped block (rounded up to the granule; the block's size and
// offset are whole granules), which becomes free and merges with free neighbours. -1 past the capacity.
std::int64_t expandable_allocator::map(pool_state& p, std::uint64_t u, std::uint64_t bytes) {
  const std::uint64_t mapped = std::min(round_up(bytes, p.granule_bytes), blocks_[u].size);
  if (!out_of_memory_ && (mapped > capacity_ || reserved_ > capacity_ - mapped)) return -1;
  if (mapped < blocks_[u].size) split_off(u, mapped, state::unmapped);
  reserved_ = checked_add(reserved_, mapped, "reserved bytes");
  peak_reserved_ = std::max(peak_reserved_, reserved_);
  set_state(u, state::free);
  return static_cast<std::int64_t>(merge_with_neighbours(u));
}

// try_allocate_expandable_block: the lowest unmapped range that, from the free block before it (if any)
// through the free and unmapped blocks that follow, holds `size` (find_expandable_block; with none, a new
// segment), mapped until the free block is large enough.
std::int64_t expandable_allocator::grow(pool_state& p, bool small, std::uint64_t size) {
  std::int64_t start = -1;
  for (const auto& [segment, offset, u] : p.unmapped) {
    const std::int64_t prev = blocks_[u].prev;
    const std::uint64_t from =
        prev >= 0 && blocks_[static_cast<std::uint64_t>(prev)].st == state::free ? static_cast<std::uint64_t>(prev) : u;
    std::uint64_t run = 0;
    for (std::int64_t i = static_cast<std::int64_t>(from); i >= 0 && run < size; i = blocks_[static_cast<std::uint64_t>(i)].next) {
      if (blocks_[static_cast<std::uint64_t>(i)].st == state::allocated) break;
      run += blocks_[static_cast<std::uint64_t>(i)].size;
    }
    if (run >= size) {
      start = static_cast<std::int64_t>(from);
      break;
    }
  }
  if (start < 0) {  // a new segment, after the others (a request beyond a segment's size gets one its size)
    block whole;
    whole.segment = segments_made_++;
    whole.size = std::max(p.segment_bytes, round_up(size, p.granule_bytes));
    whole.small = small;
    whole.st = state::allocated;  // until set_state files it
    start = static_cast<std::int64_t>(new_block(whole));
    set_state(static_cast<std::uint64_t>(start), state::unmapped);
  }
  std::uint64_t at = static_cast<std::uint64_t>(start);
  if (blocks_[at].st == state::unmapped) {
    const std::int64_t m = map(p, at, size);
    if (m < 0) return -1;
    at = static_cast<std::uint64_t>(m);
  }
  while (blocks_[at].size < size) {  // the free block's next neighbour is unmapped: map what is missing
    const std::uint64_t u = static_cast<std::uint64_t>(blocks_[at].next);
    const std::int64_t m = map(p, u, size - blocks_[at].size);
    if (m < 0) return -1;
    at = static_cast<std::uint64_t>(m);
  }
  return static_cast<std::int64_t>(at);
}

void expandable_allocator::release_cached() {
  ++cache_releases_;
  for (bool small : {true, false}) {
    pool_state& p = pool(small);
    std::vector<std::uint64_t> free_blocks;
    for (const auto& key : p.free) free_blocks.push_back(std::get<3>(key));
    for (std::uint64_t i : free_blocks) {
      const std::uint64_t begin = blocks_[i].offset, end = begin + blocks_[i].size;
      const std::uint64_t first = round_up(begin, p.granule_bytes), last = end / p.granule_bytes * p.granule_bytes;
      if (last <= first) continue;  // no whole granule inside
      std::uint64_t whole = i;
      if (first > begin) whole = split_off(i, first - begin, state::free);
      if (last < end) split_off(whole, last - first, state::free);
      set_state(whole, state::unmapped);
      reserved_ -= last - first;
      const std::uint64_t merged = merge_with_neighbours(whole);
      if (blocks_[merged].prev < 0 && blocks_[merged].next < 0) {  // nothing mapped: the segment is given back
        set_state(merged, state::allocated);
        unused_.push_back(merged);
      }
    }
  }
}

expandable_allocator::handle expandable_allocator::allocate(std::uint64_t bytes) {
  const std::uint64_t size = caching_allocator::round_size(bytes);
  const bool small = size <= small_size;
  pool_state& p = pool(small);
  std::int64_t found = best_free_block(p, size);
  if (found < 0) found = grow(p, small, size);
  if (found < 0) {  // mapping failed: unmap what no tensor uses, try once more
    release_cached();
    found = grow(p, small, size);
    if (found < 0) {
      out_of_memory_ = true;  // the program stops here; from now on the capacity no longer applies
      found = grow(p, small, size);
    }
  }
  const std::uint64_t i = static_cast<std::uint64_t>(found);
  if (blocks_[i].size - size >= min_block) split_off(i, size, state::free);
  set_state(i, state::allocated);
  allocated_ += blocks_[i].size;
  peak_allocated_ = std::max(peak_allocated_, allocated_);
  return i;
}

void expandable_allocator::free(handle h) {
  allocated_ -= blocks_[h].size;
  set_state(h, state::free);
  merge_with_neighbours(h);
}

}  // namespace trainplan
