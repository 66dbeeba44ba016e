// Fuzz target: sweep axes as typed (planner/util/sweep_axis.hpp): parse_count_axis (binary and decimal counts),
// parse_name_axis and parse_probability_axis must return or throw input_error, and keep their promises:
//   - a count axis is never empty, every value is at least 1, and it never holds more than max_values
//     values: that bound is what keeps "1:16T" from filling memory (the default, 2^20 values, is 8 MiB);
//     it is checked both with a small bound (64) and with the default one the CLI uses;
//   - the same text gives the same values under both bounds whenever the small one accepts it;
//   - a name axis has one non-empty item per comma-separated field, none with a comma or outer spaces;
//   - a probability axis has as many values as the name axis of the same text, each within [0, 1).
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.hpp"
#include "planner/util/sweep_axis.hpp"

using namespace trainplan;
using trainplan::fuzz::require;
using trainplan::fuzz::returns_or_input_error;

namespace {

constexpr std::size_t small_bound = 64;
constexpr std::size_t default_bound = std::size_t{1} << 20;  // parse_count_axis's default max_values

void check_count_axis(std::string_view text, bool decimal) {
  std::vector<std::uint64_t> small, full;
  const bool small_ok = returns_or_input_error([&] { small = parse_count_axis(text, "--seq", decimal, small_bound); });
  const bool full_ok = returns_or_input_error([&] { full = parse_count_axis(text, "--seq", decimal); });
  for (const auto* axis : {small_ok ? &small : nullptr, full_ok ? &full : nullptr}) {
    if (!axis) continue;
    require(!axis->empty(), "an empty count axis was accepted");
    for (std::uint64_t v : *axis) require(v >= 1, "a count axis holds a value below 1");
  }
  if (small_ok) require(small.size() <= small_bound, "a count axis holds more than max_values values");
  if (full_ok) require(full.size() <= default_bound, "a count axis holds more than the default max_values values");
  if (small_ok) require(full_ok && full == small, "the bound changed the values of an axis within it");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_count_axis(text, false);
  check_count_axis(text, true);

  std::vector<std::string> names;
  const bool names_ok = returns_or_input_error([&] { names = parse_name_axis(text, "--gpu"); });
  if (names_ok) {
    std::size_t fields = 1;
    for (char c : text) fields += c == ',';
    require(names.size() == fields, "a name axis has other than one item per comma-separated field");
    for (const std::string& n : names) {
      require(!n.empty(), "a name axis holds an empty name");
      require(n.find(',') == std::string::npos, "a name holds a comma");
      require(n.front() != ' ' && n.back() != ' ', "a name keeps outer spaces");
    }
  }
  std::vector<double> probabilities;
  if (returns_or_input_error([&] { probabilities = parse_probability_axis(text, "--dropout"); })) {
    require(names_ok && probabilities.size() == names.size(), "a probability axis and its names disagree");
    for (double p : probabilities) require(std::isfinite(p) && p >= 0.0 && p < 1.0, "a probability outside [0, 1)");
  }
  return 0;
}
