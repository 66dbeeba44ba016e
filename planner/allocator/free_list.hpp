#pragma once
// One pool's free blocks for fast_caching_allocator, in caching_allocator's order: by (size, segment, offset),
// the best fit being the first block not smaller than a request (caching_allocator.hpp, after the pools of
// c10/cuda/CUDACachingAllocator.cpp: a std::set ordered by size, then address). Stored as short sorted runs
// (at most max_run entries each), in order, with each run's last entry beside them: an insert or erase
// searches the runs' last entries, then one run, and moves at most a run's entries, where one sorted vector
// moved half the pool (a pool holds up to several hundred free blocks in a replay: docs/allocator-speed.md).
// Nothing is allocated per event once the runs have grown: an emptied run's storage is kept for the next.
#include <algorithm>
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
    std::size_t run = 0, at = 0;
  };
  // The first block not smaller than `size_bytes` (the best fit); false where none is.
  bool first_not_smaller(std::uint64_t size_bytes, position& p) const;
  // The block after p in the order; false where p was the last.
  bool next(position& p) const {
    if (++p.at < runs_[p.run].size()) return true;
    p.at = 0;
    return ++p.run < runs_.size();
  }
  const entry& at(const position& p) const { return runs_[p.run][p.at]; }
  void erase(const position& p) { erase_at(p.run, p.at); }
  // Calls keep(entry) on every block in order and drops those it returns false for.
  template <class keep_fn>
  void keep_only(keep_fn keep);
  std::size_t size() const { return count_; }

 private:
  static constexpr std::size_t max_run = 32;
  void erase_at(std::size_t run, std::size_t at);
  void drop_run(std::size_t run);

  std::vector<std::vector<entry>> runs_;  // each sorted and non-empty; all of run k before run k + 1
  std::vector<entry> lasts_;              // runs_[k].back()
  std::vector<std::vector<entry>> spare_; // emptied runs, their storage kept
  std::size_t count_ = 0;
};

template <class keep_fn>
void free_list::keep_only(keep_fn keep) {
  for (std::size_t k = 0; k < runs_.size();) {
    std::vector<entry>& run = runs_[k];
    auto kept = run.begin();
    for (const entry& e : run)
      if (keep(e)) *kept++ = e;
    count_ -= static_cast<std::size_t>(run.end() - kept);
    run.erase(kept, run.end());
    if (run.empty()) {
      drop_run(k);
      continue;
    }
    lasts_[k] = run.back();
    ++k;
  }
}

}  // namespace trainplan
