#include "planner/time/busbw_curve.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace trainplan {

double interpolated_bus_gbytes_per_s(const std::vector<measured_point>& points, double bytes) {
  std::vector<std::pair<double, double>> sorted;  // (message bytes, busbw GB/s)
  for (const measured_point& p : points)
    if (p.bus_gbytes_per_s > 0 && p.message_bytes > 0) sorted.emplace_back(p.message_bytes, p.bus_gbytes_per_s);
  if (sorted.empty()) throw std::invalid_argument("interpolated_bus_gbytes_per_s: no point above 0 GB/s");
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  // A larger message never takes less time than a smaller one. Measured tables say otherwise at a few sizes, in the
  // noise of latency-bound runs (DGX H100: 21.35 GB/s at 512 KiB, 43.7 at 1 MiB, so 1 MiB ran 2% faster; HGX B200:
  // 2.17 GB/s at 64 KiB, 4.86 at 128 KiB, 11% faster), and the interpolation passed that on: a planner choosing a
  // bucket size would see a bigger bucket as cheaper. So each size's time is at least the one before it: its busbw
  // at most the previous size's x the size ratio (tests/planner/time/test_collectives.cpp checks the time rises).
  for (std::size_t i = 1; i < sorted.size(); ++i)
    sorted[i].second = std::min(sorted[i].second, sorted[i - 1].second * sorted[i].first / sorted[i - 1].first);
  const auto& [first_bytes, first_bw] = sorted.front();
  const auto& [last_bytes, last_bw] = sorted.back();
  if (bytes <= first_bytes) return first_bw * bytes / first_bytes;
  if (bytes >= last_bytes) return last_bw;
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    const auto& [lo_bytes, lo_bw] = sorted[i - 1];
    const auto& [hi_bytes, hi_bw] = sorted[i];
    if (bytes > hi_bytes) continue;
    if (hi_bytes == lo_bytes) return hi_bw;
    const double w = std::log(bytes / lo_bytes) / std::log(hi_bytes / lo_bytes);
    return std::exp(std::log(lo_bw) + w * (std::log(hi_bw) - std::log(lo_bw)));
  }
  return last_bw;
}

}  // namespace trainplan
