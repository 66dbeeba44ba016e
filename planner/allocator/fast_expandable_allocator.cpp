// The expandable-segments allocator at sweep speed (fast_expandable_allocator.hpp): expandable_allocator's rules
// (after c10/cuda/CUDACachingAllocator.cpp with expandable_segments:True) in the same order, each pool's free
// blocks in a free_list and its unmapped ranges in a short sorted vector instead of std::sets.
#include "planner/allocator/fast_expandable_allocator.hpp"

#include <algorithm>

#include "planner/allocator/caching_allocator.hpp"
#include "planner/allocator/expandable_allocator.hpp"
#include "planner/util/checked_math.hpp"

namespace trainplan {
namespace {

constexpr std::uint64_t small_size = 1ull << 20;  // kSmallSize: the small pool's largest request
constexpr std::uint64_t min_block = 512;          // kMinBlockSize: should_split's least remainder here

std::uint64_t round_up(std::uint64_t bytes, std::uint64_t granule) {
  return checked_mul((bytes + granule - 1) / granule, granule, "expandable segment");
}

}  // namespace

// ExpandableSegment's constructor: the device's memory and an eighth more, in whole granules.
fast_expandable_allocator::fast_expandable_allocator(std::uint64_t gpu_total_bytes) {
  small_.granule_bytes = expandable_allocator::small_granule_bytes;
  large_.granule_bytes = expandable_allocator::large_granule_bytes;
  for (pool_state* p : {&small_, &large_})
    p->segment_bytes = std::max(p->granule_bytes, round_up(checked_add(gpu_total_bytes, gpu_total_bytes / 8, "GPU memory"),
                                                           p->granule_bytes));
}

std::uint32_t fast_expandable_allocator::new_block(const block& b) {
  if (unused_.empty()) {
    blocks_.push_back(b);
    return static_cast<std::uint32_t>(blocks_.size() - 1);
  }
  const std::uint32_t i = unused_.back();
  unused_.pop_back();
  blocks_[i] = b;
  return i;
}

void fast_expandable_allocator::insert_free(std::uint32_t i) {
  const block& b = blocks_[i];
  pool(b.small).free.insert({b.size, b.offset, b.segment, i});
}

void fast_expandable_allocator::erase_free(std::uint32_t i) {
  const block& b = blocks_[i];
  pool(b.small).free.erase({b.size, b.offset, b.segment, i});
}

std::size_t fast_expandable_allocator::unmapped_at(const pool_state& p, std::uint32_t i) const {
  const block& b = blocks_[i];
  const auto at = std::lower_bound(p.unmapped.begin(), p.unmapped.end(), b, [](const unmapped_range& r, const block& x) {
    return r.segment != x.segment ? r.segment < x.segment : r.offset < x.offset;
  });
  return static_cast<std::size_t>(at - p.unmapped.begin());
}

// Block i keeps its first `keep` bytes; the rest, of `rest_state`, follows it in the segment.
std::uint32_t fast_expandable_allocator::split(std::uint32_t i, std::uint64_t keep, block_state rest_state) {
  block rest;
  rest.segment = blocks_[i].segment;
  rest.offset = blocks_[i].offset + keep;
  rest.size = blocks_[i].size - keep;
  rest.small = blocks_[i].small;
  rest.st = rest_state;
  rest.prev = static_cast<std::int32_t>(i);
  rest.next = blocks_[i].next;
  blocks_[i].size = keep;  // before new_block: it may move blocks_
  const std::uint32_t r = new_block(rest);
  if (rest.next >= 0) blocks_[static_cast<std::uint32_t>(rest.next)].prev = static_cast<std::int32_t>(r);
  blocks_[i].next = static_cast<std::int32_t>(r);
  return r;
}

void fast_expandable_allocator::absorb_next(std::uint32_t into) {
  const std::uint32_t n = static_cast<std::uint32_t>(blocks_[into].next);
  blocks_[into].size += blocks_[n].size;
  blocks_[into].next = blocks_[n].next;
  if (blocks_[into].next >= 0) blocks_[static_cast<std::uint32_t>(blocks_[into].next)].prev = static_cast<std::int32_t>(into);
  unused_.push_back(n);
}

// A block's size plus the unmapped space right after it: what get_free_block compares.
std::uint64_t fast_expandable_allocator::expandable_size(std::uint32_t i) const {
  const block& b = blocks_[i];
  if (b.next >= 0 && blocks_[static_cast<std::uint32_t>(b.next)].st == block_state::unmapped)
    return b.size + blocks_[static_cast<std::uint32_t>(b.next)].size;
  return b.size;
}

// The smallest free block that holds `size`, stepping past it to the next in (size, address) order while that
// one's expandable size is strictly smaller (expandable_allocator::best_free_block), taken out of the free list.
// A block with nothing unmapped after it stops the walk at once: every later one is at least its size.
std::int64_t fast_expandable_allocator::take_free_block(pool_state& p, std::uint64_t size) {
  free_list::position at;
  if (!p.free.first_not_smaller(size, at)) return -1;
  for (;;) {
    const free_list::entry& here = p.free.at(at);
    const std::uint64_t reach = expandable_size(here.index);
    if (reach == here.size) break;
    free_list::position next = at;
    if (!p.free.next(next) || expandable_size(p.free.at(next).index) >= reach) break;
    at = next;
  }
  const std::uint32_t i = p.free.at(at).index;
  p.free.erase(at);
  return i;
}

// map_block: maps the first `bytes` of unmapped block u (rounded up to the granule), which becomes free and
// merges with its free neighbours; the merged block, filed as free. -1 past the capacity.
std::int64_t fast_expandable_allocator::map(pool_state& p, std::uint32_t u, std::uint64_t bytes) {
  const std::uint64_t mapped = std::min(round_up(bytes, p.granule_bytes), blocks_[u].size);
  if (!out_of_memory_ && (mapped > capacity_ || reserved_ > capacity_ - mapped)) {
    checks_.failed(reserved_, mapped);
    return -1;
  }
  const std::size_t place = unmapped_at(p, u);
  if (mapped < blocks_[u].size) {  // the rest stays unmapped, in u's place in the address order
    const std::uint32_t rest = split(u, mapped, block_state::unmapped);
    p.unmapped[place] = {blocks_[rest].segment, rest, blocks_[rest].offset};
  } else {
    p.unmapped.erase(p.unmapped.begin() + static_cast<std::ptrdiff_t>(place));
  }
  reserved_ = checked_add(reserved_, mapped, "reserved bytes");
  peak_reserved_ = std::max(peak_reserved_, reserved_);
  if (!out_of_memory_) checks_.passed(reserved_);
  blocks_[u].st = block_state::free;
  std::uint32_t merged = u;
  const std::int32_t n = blocks_[u].next;
  if (n >= 0 && blocks_[static_cast<std::uint32_t>(n)].st == block_state::free) {
    erase_free(static_cast<std::uint32_t>(n));
    absorb_next(u);
  }
  const std::int32_t before = blocks_[u].prev;
  if (before >= 0 && blocks_[static_cast<std::uint32_t>(before)].st == block_state::free) {
    merged = static_cast<std::uint32_t>(before);
    erase_free(merged);
    absorb_next(merged);
  }
  insert_free(merged);
  return merged;
}

// try_allocate_expandable_block (expandable_allocator::grow): the lowest unmapped range that, from the free block
// before it (if any) through the free and unmapped blocks that follow, holds `size`; with none, a new segment
// after the others. Mapped until the free block there holds `size`; that block, filed as free, or -1.
std::int64_t fast_expandable_allocator::grow(pool_state& p, bool small, std::uint64_t size) {
  std::int64_t start = -1;
  for (const unmapped_range& r : p.unmapped) {
    const std::int32_t prev = blocks_[r.index].prev;
    const std::uint32_t from =
        prev >= 0 && blocks_[static_cast<std::uint32_t>(prev)].st == block_state::free ? static_cast<std::uint32_t>(prev) : r.index;
    std::uint64_t run = 0;
    for (std::int32_t i = static_cast<std::int32_t>(from); i >= 0 && run < size; i = blocks_[static_cast<std::uint32_t>(i)].next) {
      if (blocks_[static_cast<std::uint32_t>(i)].st == block_state::allocated) break;
      run += blocks_[static_cast<std::uint32_t>(i)].size;
    }
    if (run >= size) {
      start = from;
      break;
    }
  }
  if (start < 0) {  // a new segment (a request beyond a segment's size gets one its size): the highest addresses
    block whole;
    whole.segment = static_cast<std::uint32_t>(segments_made_++);
    whole.size = std::max(p.segment_bytes, round_up(size, p.granule_bytes));
    whole.small = small;
    const std::uint32_t w = new_block(whole);
    p.unmapped.push_back({whole.segment, w, 0});
    start = w;
  }
  std::uint32_t at = static_cast<std::uint32_t>(start);
  if (blocks_[at].st == block_state::unmapped) {
    const std::int64_t m = map(p, at, size);
    if (m < 0) return -1;
    at = static_cast<std::uint32_t>(m);
  }
  while (blocks_[at].size < size) {  // the free block's next neighbour is unmapped: map what is missing
    const std::int64_t m = map(p, static_cast<std::uint32_t>(blocks_[at].next), size - blocks_[at].size);
    if (m < 0) return -1;
    at = static_cast<std::uint32_t>(m);
  }
  return at;
}

// release_cached_blocks (expandable_allocator::release_cached): every whole granule of a free block unmapped; a
// segment left with nothing mapped given back.
void fast_expandable_allocator::release_cached() {
  ++cache_releases_;
  for (bool small : {true, false}) {
    pool_state& p = pool(small);
    scratch_.clear();
    free_list::position at;
    if (p.free.first_not_smaller(0, at))
      do scratch_.push_back(p.free.at(at).index);
      while (p.free.next(at));
    for (const std::uint32_t i : scratch_) {
      const std::uint64_t begin = blocks_[i].offset, end = begin + blocks_[i].size;
      const std::uint64_t first = round_up(begin, p.granule_bytes), last = end / p.granule_bytes * p.granule_bytes;
      if (last <= first) continue;  // no whole granule inside
      erase_free(i);
      std::uint32_t whole = i;
      if (first > begin) {
        whole = split(i, first - begin, block_state::free);
        insert_free(i);
      }
      if (last < end) insert_free(split(whole, last - first, block_state::free));
      blocks_[whole].st = block_state::unmapped;
      reserved_ -= last - first;
      const std::int32_t n = blocks_[whole].next;
      if (n >= 0 && blocks_[static_cast<std::uint32_t>(n)].st == block_state::unmapped) {
        p.unmapped.erase(p.unmapped.begin() + static_cast<std::ptrdiff_t>(unmapped_at(p, static_cast<std::uint32_t>(n))));
        absorb_next(whole);
      }
      const std::int32_t before = blocks_[whole].prev;
      if (before >= 0 && blocks_[static_cast<std::uint32_t>(before)].st == block_state::unmapped) {
        whole = static_cast<std::uint32_t>(before);  // filed at its own offset already
        absorb_next(whole);
      } else {
        p.unmapped.insert(p.unmapped.begin() + static_cast<std::ptrdiff_t>(unmapped_at(p, whole)),
                          {blocks_[whole].segment, whole, blocks_[whole].offset});
      }
      if (blocks_[whole].prev < 0 && blocks_[whole].next < 0) {  // nothing mapped: the segment is given back
        p.unmapped.erase(p.unmapped.begin() + static_cast<std::ptrdiff_t>(unmapped_at(p, whole)));
        unused_.push_back(whole);
      }
    }
  }
}

fast_expandable_allocator::handle fast_expandable_allocator::allocate(std::uint64_t bytes, std::uint32_t owner) {
  const std::uint64_t size = caching_allocator::round_size(bytes);
  const bool small = size <= small_size;
  pool_state& p = pool(small);
  std::int64_t found = take_free_block(p, size);
  if (found < 0) {
    found = grow(p, small, size);
    if (found < 0) {  // mapping failed: unmap what no tensor uses, try once more
      release_cached();
      found = grow(p, small, size);
      if (found < 0) {
        out_of_memory_ = true;  // the program stops here; from now on the capacity no longer applies
        found = grow(p, small, size);
      }
    }
    erase_free(static_cast<std::uint32_t>(found));
  }
  const std::uint32_t i = static_cast<std::uint32_t>(found);
  if (blocks_[i].size - size >= min_block) insert_free(split(i, size, block_state::free));
  blocks_[i].st = block_state::allocated;
  blocks_[i].owner = owner;
  allocated_ += blocks_[i].size;
  peak_allocated_ = std::max(peak_allocated_, allocated_);
  return i;
}

void fast_expandable_allocator::free(handle h) {
  allocated_ -= blocks_[h].size;
  blocks_[h].st = block_state::free;
  // Merged with free mapped neighbours (the next one into this, this into the previous); nothing is unmapped.
  std::uint32_t merged = h;
  const std::int32_t n = blocks_[h].next;
  if (n >= 0 && blocks_[static_cast<std::uint32_t>(n)].st == block_state::free) {
    erase_free(static_cast<std::uint32_t>(n));
    absorb_next(h);
  }
  const std::int32_t before = blocks_[h].prev;
  if (before >= 0 && blocks_[static_cast<std::uint32_t>(before)].st == block_state::free) {
    merged = static_cast<std::uint32_t>(before);
    erase_free(merged);
    absorb_next(merged);
  }
  insert_free(merged);
}

void fast_expandable_allocator::state(std::vector<std::uint64_t>& out) const {
  out.clear();
  out.insert(out.end(), {allocated_, reserved_, out_of_memory_ ? 1ull : 0ull});
  // The live segments' first blocks, in address order (segment numbers only grow: a new segment lies above
  // every live one, so their order, not the numbers, is what a later event can see).
  std::vector<bool> unused(blocks_.size(), false);
  for (const std::uint32_t i : unused_) unused[i] = true;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> heads;  // (segment, block)
  for (std::uint32_t i = 0; i < blocks_.size(); ++i)
    if (!unused[i] && blocks_[i].prev < 0) heads.push_back({blocks_[i].segment, i});
  std::sort(heads.begin(), heads.end());
  std::uint64_t rank = 0;
  for (const auto& [segment, head] : heads) {
    out.push_back(rank++);
    for (std::int32_t i = static_cast<std::int32_t>(head); i >= 0; i = blocks_[static_cast<std::uint32_t>(i)].next) {
      const block& b = blocks_[static_cast<std::uint32_t>(i)];
      out.insert(out.end(), {b.offset, b.size, static_cast<std::uint64_t>(b.st) | (b.small ? 4ull : 0ull),
                             b.st == block_state::allocated ? b.owner : 0ull});
    }
  }
}

}  // namespace trainplan
