// The medians of median.hpp: the error summary (largest and median of |errors|) and the upper median.
#include "planner/measure/median.hpp"

#include <algorithm>
#include <cmath>

#include "planner/util/input_error.hpp"

namespace trainplan {

error_summary summarize_errors(std::vector<double> errors_pct) {
  if (errors_pct.empty()) throw input_error("no errors to summarize");
  for (double& e : errors_pct) e = std::abs(e);
  std::sort(errors_pct.begin(), errors_pct.end());
  const std::size_t n = errors_pct.size();
  return {errors_pct.back(), n % 2 ? errors_pct[n / 2] : (errors_pct[n / 2 - 1] + errors_pct[n / 2]) / 2};
}

std::uint64_t upper_median(std::vector<std::uint64_t> values) {
  if (values.empty()) throw input_error("no values to take the median of");
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace trainplan
