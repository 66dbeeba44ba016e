// A pool's free blocks as one bucket per distinct size (free_list.hpp).
#include "planner/allocator/free_list.hpp"

namespace trainplan {
namespace {

// std::lower_bound's answer over [first, first + n) for a predicate true on a prefix, with a conditional move
// in place of a branch per halving (the branch mispredicts about half the time).
template <class T, class pred>
std::size_t first_false(const T* first, std::size_t n, pred is_before) {
  const T* base = first;
  while (n > 0) {
    const std::size_t half = n / 2;
    const bool right = is_before(base[half]);
    base = right ? base + half + 1 : base;
    n = right ? n - half - 1 : half;
  }
  return static_cast<std::size_t>(base - first);
}

// Whether block (segment, offset) a lies after b in address order, without branches.
template <class A, class B>
bool after(const A& a, const B& b) {
  return (a.segment > b.segment) | ((a.segment == b.segment) & (a.offset > b.offset));
}

}  // namespace

std::size_t free_list::rank_not_smaller(std::uint64_t size_bytes) const {
  return first_false(sizes_.data(), sizes_.size(), [size_bytes](std::uint64_t s) { return s < size_bytes; });
}

void free_list::drop_size(std::size_t r) {
  unused_ids_.push_back(bucket_ids_[r]);
  sizes_.erase(sizes_.begin() + static_cast<std::ptrdiff_t>(r));
  bucket_ids_.erase(bucket_ids_.begin() + static_cast<std::ptrdiff_t>(r));
}

void free_list::insert(const entry& e) {
  ++count_;
  const std::size_t r = rank_not_smaller(e.size);
  if (r == sizes_.size() || sizes_[r] != e.size) {  // a size no free block has: a bucket of its own
    std::uint32_t id;
    if (!unused_ids_.empty()) {
      id = unused_ids_.back();
      unused_ids_.pop_back();
    } else {
      id = static_cast<std::uint32_t>(buckets_.size());
      buckets_.emplace_back();
    }
    sizes_.insert(sizes_.begin() + static_cast<std::ptrdiff_t>(r), e.size);
    bucket_ids_.insert(bucket_ids_.begin() + static_cast<std::ptrdiff_t>(r), id);
    buckets_[id].push_back({e.offset, e.segment, e.index});
    return;
  }
  bucket& b = buckets_[bucket_ids_[r]];
  // After every block at a higher address (an equal place is never there: one block per place).
  const std::size_t at = first_false(b.data(), b.size(), [&e](const slot& x) { return after(x, e); });
  b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), slot{e.offset, e.segment, e.index});
}

void free_list::erase_slot(std::size_t r, std::size_t at) {
  --count_;
  bucket& b = buckets_[bucket_ids_[r]];
  b.erase(b.begin() + static_cast<std::ptrdiff_t>(at));
  if (b.empty()) drop_size(r);
}

bool free_list::erase(const entry& e) {
  const std::size_t r = rank_not_smaller(e.size);
  if (r == sizes_.size() || sizes_[r] != e.size) return false;
  const bucket& b = buckets_[bucket_ids_[r]];
  const std::size_t at = first_false(b.data(), b.size(), [&e](const slot& x) { return after(x, e); });
  if (at == b.size() || b[at].index != e.index || b[at].segment != e.segment || b[at].offset != e.offset) return false;
  erase_slot(r, at);
  return true;
}

void free_list::erase(const position& p) {
  erase_slot(p.size_rank, bucket_of(p).size() - 1 - p.from_best);
}

bool free_list::first_not_smaller(std::uint64_t size_bytes, position& p) const {
  p.size_rank = rank_not_smaller(size_bytes);
  p.from_best = 0;
  return p.size_rank < sizes_.size();
}

std::size_t free_list::memory_bytes() const {
  std::size_t bytes = sizes_.capacity() * sizeof(std::uint64_t) + bucket_ids_.capacity() * sizeof(std::uint32_t) +
                      buckets_.capacity() * sizeof(bucket) + unused_ids_.capacity() * sizeof(std::uint32_t);
  for (const bucket& b : buckets_) bytes += b.capacity() * sizeof(slot);
  return bytes;
}

bool free_list::take_best_fit(std::uint64_t size_bytes, entry& out) {
  const std::size_t r = rank_not_smaller(size_bytes);
  if (r == sizes_.size()) return false;
  bucket& b = buckets_[bucket_ids_[r]];
  const slot s = b.back();
  out = {sizes_[r], s.offset, s.segment, s.index};
  --count_;
  b.pop_back();
  if (b.empty()) drop_size(r);
  return true;
}

}  // namespace trainplan
