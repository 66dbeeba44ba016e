#include "planner/time/busbw_curve.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace trainplan {

double interpolated_bus_gbytes_per_s(const std::vector<measured_point>& points, double bytes) {
  std::vector<const measured_point*> sorted;
  for (const measured_point& p : points)
    if (p.bus_gbytes_per_s > 0 && p.message_bytes > 0) sorted.push_back(&p);
  if (sorted.empty()) throw std::invalid_argument("interpolated_bus_gbytes_per_s: no point above 0 GB/s");
  std::sort(sorted.begin(), sorted.end(), [](const measured_point* a, const measured_point* b) { return a->message_bytes < b->message_bytes; });
  const measured_point& first = *sorted.front();
  const measured_point& last = *sorted.back();
  if (bytes <= first.message_bytes) return first.bus_gbytes_per_s * bytes / first.message_bytes;
  if (bytes >= last.message_bytes) return last.bus_gbytes_per_s;
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    const measured_point& lo = *sorted[i - 1];
    const measured_point& hi = *sorted[i];
    if (bytes > hi.message_bytes) continue;
    if (hi.message_bytes == lo.message_bytes) return hi.bus_gbytes_per_s;
    const double w = std::log(bytes / lo.message_bytes) / std::log(hi.message_bytes / lo.message_bytes);
    return std::exp(std::log(lo.bus_gbytes_per_s) + w * (std::log(hi.bus_gbytes_per_s) - std::log(lo.bus_gbytes_per_s)));
  }
  return last.bus_gbytes_per_s;
}

}  // namespace trainplan
