#pragma once
// Medians of measured values, in the two forms the fits and checks need:
//   summarize_errors  the largest and the median of |errors| (percent), an even count's median the mean of the
//                     two middle values: a statistic of the errors, not one of them (the timing fit's residuals,
//                     plan check's GPU busy times)
//   upper_median      the upper of the two middle values of an even count: one of the measurements itself, for
//                     a constant set to what a run measured (the CUDA context of calibration_fit and of a
//                     collector's reports)
#include <cstdint>
#include <vector>

namespace trainplan {

struct error_summary {
  double max_pct = 0;
  double median_pct = 0;
};

// Throws input_error for an empty list: there is no median of nothing.
error_summary summarize_errors(std::vector<double> errors_pct);
std::uint64_t upper_median(std::vector<std::uint64_t> values);

}  // namespace trainplan
