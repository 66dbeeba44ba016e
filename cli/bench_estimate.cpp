// The estimate against the replay on the committed measurements (bench_estimate.hpp).
#include "cli/bench_estimate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "planner/io/catalog.hpp"
#include "planner/measure/estimate_error.hpp"
#include "planner/measure/median.hpp"

namespace trainplan::cli {

std::vector<std::filesystem::path> committed_measurement_folders() {
  std::error_code ec;
  std::vector<std::filesystem::path> roots{std::filesystem::current_path(ec)};
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && exe.has_parent_path()) roots.push_back(exe.parent_path().parent_path());  // build/plan -> the repository
  std::vector<std::filesystem::path> out;
  for (const std::filesystem::path& root : roots)
    for (const char* sub : {"data/measurements", "tests/data/measurements"}) {
      const std::filesystem::path folder = std::filesystem::weakly_canonical(root / sub, ec);
      if (!ec && std::filesystem::is_directory(folder, ec) && std::find(out.begin(), out.end(), folder) == out.end())
        out.push_back(folder);
    }
  return out;
}

void print_estimate_error(const std::vector<std::filesystem::path>& folders) {
  const estimate_rows found = estimate_against_replay(catalog::load(), folders);
  const std::vector<estimate_row>& rows = found.rows;
  if (rows.empty()) {
    fmt::print("--estimate against the replay: no committed collector reports found (run from the repository)\n");
    return;
  }
  std::vector<double> errors;
  for (const estimate_row& r : rows) errors.push_back(r.error_pct());
  const double median = summarize_errors(errors).median_pct;
  const estimate_row& largest = *std::max_element(rows.begin(), rows.end(), [](const estimate_row& a, const estimate_row& b) {
    return std::abs(a.error_pct()) < std::abs(b.error_pct());
  });
  const auto below = std::count_if(rows.begin(), rows.end(), [](const estimate_row& r) { return r.error_pct() < 0; });
  fmt::print("--estimate against the replay's device peak, on {} committed runs of {} collector reports: median {:.1f}%, "
             "largest {:+.1f}% ({}); {} of {} below it\n",
             rows.size(), found.files, median, largest.error_pct(), largest.id, below, rows.size());
}

}  // namespace trainplan::cli
