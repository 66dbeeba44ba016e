// Fuzz target: the numbers users type (planner/util/quantity_parse.hpp). Every input, given to each of
// parse_decimal_count, parse_binary_count, parse_integer and parse_probability, must return or throw
// input_error. What they return must keep the header's promises:
//   - counts are at least 1 and exact: "<digits>[.<digits>]<suffix>" recomputed in 128-bit integers gives
//     the same value (K/M/B/G/T powers of 1000, or k/M/G/T powers of 1024);
//   - parse_integer is at least its minimum, and a text of digits only means the same to all three
//     integer parsers (or to none of them);
//   - a probability is finite and within [0, 1);
//   - every count prints back to a text that parses to itself.
#include <cctype>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz/fuzz_check.hpp"
#include "planner/util/quantity_parse.hpp"

using namespace trainplan;
using trainplan::fuzz::require;
using trainplan::fuzz::returns_or_input_error;

namespace {

using u128 = unsigned __int128;

// The value of "<digits>[.<digits>]<suffix>" when the parser accepted it (so the mantissa fits 64 bits and
// at most 19 fraction digits remain); nullopt when the text is not of that form.
std::optional<u128> reference_count(std::string_view text, bool binary) {
  u128 mantissa = 0, divisor = 1;
  bool point = false, digit = false;
  std::size_t i = 0;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.' && !point) { point = true; continue; }
    if (!std::isdigit(static_cast<unsigned char>(c))) break;
    digit = true;
    mantissa = mantissa * 10 + static_cast<unsigned>(c - '0');
    if (mantissa >> 64) return std::nullopt;  // the parser must have refused this
    if (point) divisor *= 10;
    if (divisor > u128(10'000'000'000'000'000'000ull)) return std::nullopt;
  }
  if (!digit || text.size() - i > 1) return std::nullopt;
  u128 multiplier = 1;
  if (i < text.size()) {
    const char s = static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
    const u128 k = binary ? 1024 : 1000;
    if (s == 'K') multiplier = k;
    else if (s == 'M') multiplier = k * k;
    else if ((s == 'B' && !binary) || s == 'G') multiplier = k * k * k;
    else if (s == 'T') multiplier = k * k * k * k;
    else return std::nullopt;
  }
  const u128 scaled = mantissa * multiplier;  // < 2^64 * 2^40
  if (scaled % divisor != 0) return std::nullopt;
  return scaled / divisor;
}

bool digits_only(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  std::optional<std::uint64_t> decimal, binary, integer;
  returns_or_input_error([&] { decimal = parse_decimal_count(text, "--params"); });
  returns_or_input_error([&] { binary = parse_binary_count(text, "--seq"); });
  returns_or_input_error([&] { integer = parse_integer(text, "--layers"); });
  std::uint64_t integer0 = 0;
  const bool integer0_ok = returns_or_input_error([&] { integer0 = parse_integer(text, "--zero", 0); });
  double probability = 0;
  const bool probability_ok = returns_or_input_error([&] { probability = parse_probability(text, "--dropout"); });

  for (auto [value, is_binary] : {std::pair{decimal, false}, std::pair{binary, true}}) {
    if (!value) continue;
    require(*value >= 1, "a count below 1 was accepted");
    const std::optional<u128> expected = reference_count(text, is_binary);
    require(expected.has_value(), "a count was accepted from text outside <digits>[.<digits>]<suffix>");
    require(*expected == *value, "a count parsed to a value other than the exact one");
    const std::string printed = std::to_string(*value);
    require((is_binary ? parse_binary_count(printed, "--seq") : parse_decimal_count(printed, "--params")) == *value,
            "a count does not parse back from its digits");
  }
  if (integer) require(*integer >= 1, "parse_integer returned less than its minimum");
  if (integer0_ok) {
    require(parse_integer(std::to_string(integer0), "--zero", 0) == integer0, "an integer does not parse back");
    if (integer) require(*integer == integer0, "parse_integer depends on its minimum beyond refusing");
  }
  if (digits_only(text)) {
    // Digits only: the three integer parsers agree, refusing together (0, past 64 bits) or not at all.
    require(decimal == integer && binary == integer, "digit-only text means different things to the integer parsers");
  }
  if (probability_ok) require(std::isfinite(probability) && probability >= 0.0 && probability < 1.0,
                              "a probability outside [0, 1) was accepted");
  return 0;
}
