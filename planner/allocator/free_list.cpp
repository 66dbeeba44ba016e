// A pool's free blocks as short sorted runs (free_list.hpp).
#include "planner/allocator/free_list.hpp"

namespace trainplan {
namespace {

// std::lower_bound's answer over [first, first + n) for a predicate true on a prefix, with a conditional move
// in place of a branch per halving (the branch mispredicted about half the time: most of an insert's time).
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

bool before_branchless(const free_list::entry& a, const free_list::entry& b) {
  return (a.size < b.size) |
         ((a.size == b.size) & ((a.segment < b.segment) | ((a.segment == b.segment) & (a.offset < b.offset))));
}

}  // namespace

void free_list::drop_run(std::size_t run) {
  spare_.push_back(std::move(runs_[run]));
  spare_.back().clear();
  runs_.erase(runs_.begin() + static_cast<std::ptrdiff_t>(run));
  lasts_.erase(lasts_.begin() + static_cast<std::ptrdiff_t>(run));
}

void free_list::insert(const entry& e) {
  ++count_;
  if (runs_.empty()) {
    if (spare_.empty()) spare_.emplace_back();
    runs_.push_back(std::move(spare_.back()));
    spare_.pop_back();
    runs_.back().push_back(e);
    lasts_.push_back(e);
    return;
  }
  // The first run whose last entry is not before e holds its place; past every run: the last run's end.
  std::size_t k = first_false(lasts_.data(), lasts_.size(), [&e](const entry& x) { return before_branchless(x, e); });
  if (k == runs_.size()) k = runs_.size() - 1;
  std::vector<entry>& run = runs_[k];
  // upper_bound: after the entries not after e (an equal one is never there: one block per place)
  const std::size_t at = first_false(run.data(), run.size(), [&e](const entry& x) { return !before_branchless(e, x); });
  run.insert(run.begin() + static_cast<std::ptrdiff_t>(at), e);
  lasts_[k] = run.back();
  if (run.size() <= max_run) return;
  // Split in two halves: the second becomes the next run.
  std::vector<entry> second;
  if (!spare_.empty()) second = std::move(spare_.back()), spare_.pop_back();
  const auto half = run.begin() + static_cast<std::ptrdiff_t>(run.size() / 2);
  second.assign(half, run.end());
  run.erase(half, run.end());
  lasts_[k] = run.back();
  lasts_.insert(lasts_.begin() + static_cast<std::ptrdiff_t>(k + 1), second.back());
  runs_.insert(runs_.begin() + static_cast<std::ptrdiff_t>(k + 1), std::move(second));
}

void free_list::erase_at(std::size_t k, std::size_t at) {
  --count_;
  std::vector<entry>& run = runs_[k];
  run.erase(run.begin() + static_cast<std::ptrdiff_t>(at));
  if (run.empty()) {
    drop_run(k);
    return;
  }
  lasts_[k] = run.back();
  // A short run takes in the next where both fit in one, so that runs stay few as blocks come and go.
  if (k + 1 < runs_.size() && run.size() + runs_[k + 1].size() <= max_run / 2) {
    run.insert(run.end(), runs_[k + 1].begin(), runs_[k + 1].end());
    lasts_[k] = run.back();
    drop_run(k + 1);
  }
}

bool free_list::erase(const entry& e) {
  const auto is_before = [&e](const entry& x) { return before_branchless(x, e); };
  const std::size_t k = first_false(lasts_.data(), lasts_.size(), is_before);
  if (k == runs_.size()) return false;
  const std::vector<entry>& run = runs_[k];
  const std::size_t at = first_false(run.data(), run.size(), is_before);
  if (at == run.size() || run[at].index != e.index) return false;
  erase_at(k, at);
  return true;
}

bool free_list::first_not_smaller(std::uint64_t size_bytes, position& p) const {
  const auto smaller = [size_bytes](const entry& x) { return x.size < size_bytes; };
  p.run = first_false(lasts_.data(), lasts_.size(), smaller);
  if (p.run == runs_.size()) return false;
  p.at = first_false(runs_[p.run].data(), runs_[p.run].size(), smaller);  // found: the run's last is not smaller
  return true;
}

bool free_list::take_best_fit(std::uint64_t size_bytes, entry& out) {
  const auto smaller = [size_bytes](const entry& x) { return x.size < size_bytes; };
  const std::size_t k = first_false(lasts_.data(), lasts_.size(), smaller);
  if (k == runs_.size()) return false;
  const std::vector<entry>& run = runs_[k];
  const std::size_t at = first_false(run.data(), run.size(), smaller);  // found: the run's last is not smaller
  out = run[at];
  erase_at(k, at);
  return true;
}

}  // namespace trainplan
