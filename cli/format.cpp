// Number formatting for people (format.hpp): GiB (MiB below a tenth of one), grouped integers and rates,
// percentages, durations and the UTC time.
#include "cli/format.hpp"

#include <fmt/format.h>

#include <cmath>
#include <ctime>

#include "planner/util/grouped_count.hpp"

namespace trainplan::cli {

std::string gib(std::uint64_t bytes) {
  const double g = static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
  if (g < 0.1 && bytes > 0) return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return fmt::format("{:.2f} GiB", g);
}

std::string gib_signed(std::int64_t bytes) {
  const std::uint64_t magnitude = bytes < 0 ? static_cast<std::uint64_t>(-(bytes + 1)) + 1 : static_cast<std::uint64_t>(bytes);
  return (bytes < 0 ? "-" : "") + gib(magnitude);
}

std::string grouped(std::uint64_t n) { return grouped_count(n); }

// Rounded, as --json's and the sweep's figures read (a floor printed 15,592 beside their 15593).
std::string grouped_rate(double per_second) {
  return grouped(per_second > 0 ? static_cast<std::uint64_t>(std::llround(per_second)) : 0);
}

std::string percent(double fraction) { return fmt::format("{:.1f}%", 100.0 * fraction); }

std::string duration(double seconds) {
  if (!std::isfinite(seconds)) return "unknown";
  if (seconds < 120) return fmt::format("{:.3g} s", seconds);
  if (seconds < 2 * 3600) return fmt::format("{:.1f} min", seconds / 60);
  if (seconds < 2 * 86400) return fmt::format("{:.1f} h", seconds / 3600);
  if (seconds < 2 * 365.25 * 86400) return fmt::format("{:.1f} days", seconds / 86400);
  return fmt::format("{:.1f} years", seconds / (365.25 * 86400));
}

std::string scientific(double x) { return fmt::format("{:.3g}", x); }

std::string utc_now(const char* strftime_format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[64];
  if (std::strftime(buf, sizeof buf, strftime_format, &tm) == 0) return "";
  return buf;
}

std::string today() { return utc_now("%Y-%m-%d"); }

}  // namespace trainplan::cli
