#pragma once
// One pool's free blocks for fast_caching_allocator, in caching_allocator's order: by (size, segment, offset),
// the best fit being the first block not smaller than a request (caching_allocator.hpp, after the pools of
// c10/cuda/CUDACachingAllocator.cpp: a std::set ordered by size, then address).
//
// Stored as one bucket per distinct size: the sizes present in a short ascending array, and each size's blocks
// in an array ordered by address from the last, so that its best (lowest address) is at the back. A pool holds a
// few hundred free blocks of a dozen or so distinct sizes during a replay (docs/allocator-speed.md), so a best
// fit searches the sizes (one word a compare) and pops a bucket's back; an insert or erase moves only its own
// bucket's entries (or a new size's place among the sizes), not a pool's. Nothing is allocated per event once
// the buckets have grown: an emptied bucket's storage is kept for the next new size.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace trainplan {

class free_list {
 public:
  struct entry {
    std::uint64_t size = 0, offset = 0;
    std::uint32_t segment = 0, index = 0;  // index: the block's slot in fast_caching_allocator's blocks
  };
  static bool before(const entry& a, const entry& b) {
    if (a.size != b.size) return a.size < b.size;
    if (a.segment != b.segment) return a.segment < b.segment;
    return a.offset < b.offset;
  }

  void insert(const entry& e);
  // The block with e's size, segment and offset, if it is there and is e.index; false otherwise.
  bool erase(const entry& e);
  // The first block not smaller than `size_bytes` (the best fit), taken out; false where none is.
  bool take_best_fit(std::uint64_t size_bytes, entry& out);
  // A place in the order, to walk it from the best fit on (fast_expandable_allocator: get_free_block may pass
  // the best fit over for the next block). Valid until the next insert or erase.
  struct position {
    std::size_t size_rank = 0;  // in sizes_
    std::size_t from_best = 0;  // 0: the bucket's best (its back), 1: the next, ...
  };
  // The first block not smaller than `size_bytes` (the best fit); false where none is.
  bool first_not_smaller(std::uint64_t size_bytes, position& p) const;
  // The block after p in the order; false where p was the last.
  bool next(position& p) const {
    if (++p.from_best < bucket_of(p).size()) return true;
    p.from_best = 0;
    return ++p.size_rank < sizes_.size();
  }
  entry at(const position& p) const {
    const slot& s = slot_at(p);
    return {sizes_[p.size_rank], s.offset, s.segment, s.index};
  }
  void erase(const position& p);
  // Calls keep(entry) on every block in order and drops those it returns false for.
  template <class keep_fn>
  void keep_only(keep_fn keep);
  std::size_t size() const { return count_; }
  std::size_t memory_bytes() const;  // its heap storage, about (a checkpoint's cost: prefix_checkpoints, replay_program.hpp)

 private:
  struct slot {  // a block within its size's bucket
    std::uint64_t offset = 0;
    std::uint32_t segment = 0, index = 0;
  };
  using bucket = std::vector<slot>;  // by (segment, offset) from the last: the best at the back

  const bucket& bucket_of(const position& p) const { return buckets_[bucket_ids_[p.size_rank]]; }
  const slot& slot_at(const position& p) const {
    const bucket& b = bucket_of(p);
    return b[b.size() - 1 - p.from_best];
  }
  std::size_t rank_not_smaller(std::uint64_t size_bytes) const;  // the first size >= size_bytes; sizes_.size() if none
  void erase_slot(std::size_t size_rank, std::size_t at);
  void drop_size(std::size_t size_rank);  // an emptied bucket: its size taken out, its storage kept

  std::vector<std::uint64_t> sizes_;       // the distinct sizes present, ascending
  std::vector<std::uint32_t> bucket_ids_;  // bucket_ids_[r]: the bucket of sizes_[r] in buckets_
  std::vector<bucket> buckets_;            // every bucket ever made, some empty and unused
  std::vector<std::uint32_t> unused_ids_;  // buckets_ free for a new size
  std::size_t count_ = 0;
};

template <class keep_fn>
void free_list::keep_only(keep_fn keep) {
  for (std::size_t r = 0; r < sizes_.size();) {
    bucket& b = buckets_[bucket_ids_[r]];
    // Visit in the order (the back first), keeping the kept ones in their places.
    std::size_t kept_from = b.size();
    for (std::size_t i = b.size(); i-- > 0;) {
      const slot s = b[i];
      if (keep(entry{sizes_[r], s.offset, s.segment, s.index})) b[--kept_from] = s;
    }
    count_ -= kept_from;
    b.erase(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(kept_from));
    if (b.empty()) {
      drop_size(r);
      continue;
    }
    ++r;
  }
}

}  // namespace trainplan
