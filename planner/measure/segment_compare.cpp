// Measured and replayed allocator segments set side by side by pool and size (segment_compare.hpp), the
// replay's last-made segments of a size the first unmatched.
#include "planner/measure/segment_compare.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>

namespace trainplan {

segment_comparison compare_segments(const std::vector<measured_segment>& measured,
                                    const std::vector<allocator_growth>& replayed) {
  segment_comparison out;
  using size_key = std::pair<bool, std::uint64_t>;  // pool, bytes
  std::map<size_key, std::uint64_t> measured_counts;
  std::map<size_key, std::vector<const allocator_growth*>> replayed_by_size;  // in the order the replay made them
  for (const measured_segment& s : measured) {
    ++measured_counts[{s.small_pool, s.bytes}];
    ++out.measured_count;
    out.measured_bytes += s.bytes;
  }
  for (const allocator_growth& g : replayed) {
    replayed_by_size[{g.small_pool, g.added_bytes}].push_back(&g);
    ++out.replayed_count;
    out.replayed_bytes += g.added_bytes;
  }
  std::map<size_key, std::uint64_t> all = measured_counts;
  for (const auto& [key, list] : replayed_by_size) all.emplace(key, 0);
  for (const auto& [key, measured_n] : all) {
    const auto it = replayed_by_size.find(key);
    const std::uint64_t replayed_n = it == replayed_by_size.end() ? 0 : it->second.size();
    out.matched_count += std::min(measured_n, replayed_n);
    if (measured_n == replayed_n) continue;
    segment_size_difference d;
    d.small_pool = key.first;
    d.bytes = key.second;
    d.measured = measured_n;
    d.replayed = replayed_n;
    for (std::uint64_t i = measured_n; i < replayed_n; ++i) d.replay_extra.push_back(*it->second[i]);
    out.differences.push_back(std::move(d));
  }
  std::sort(out.differences.begin(), out.differences.end(), [](const segment_size_difference& a, const segment_size_difference& b) {
    const std::int64_t da = std::llabs(a.difference_bytes()), db = std::llabs(b.difference_bytes());
    if (da != db) return da > db;
    return a.bytes > b.bytes;
  });
  return out;
}

}  // namespace trainplan
