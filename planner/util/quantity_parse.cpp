// Parsing the numbers users type (quantity_parse.hpp): counts with decimal or binary suffixes and exact
// scientific notation kept in integers, plain integers, probabilities and bounded reals.
#include "planner/util/quantity_parse.hpp"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

#include "planner/util/checked_math.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {
namespace {

[[noreturn]] void fail(std::string_view option, std::string_view text, std::string_view why) {
  throw input_error(std::string(option) + ": '" + std::string(text) + "' " + std::string(why));
}

std::uint64_t pow_u64(std::uint64_t base, unsigned exponent) {
  std::uint64_t out = 1;
  for (unsigned i = 0; i < exponent; ++i) out *= base;  // callers keep this within 10^12 or 1024^2
  return out;
}

// mantissa / 10^fraction_digits x 10^exponent, exactly ("1.5e9" = 15 / 10 x 10^9), for scientific notation.
std::uint64_t apply_exponent(std::uint64_t mantissa, unsigned fraction_digits, std::string_view exponent_text,
                             std::string_view option, std::string_view text) {
  std::uint64_t exponent = 0;
  const auto [end, ec] = std::from_chars(exponent_text.data(), exponent_text.data() + exponent_text.size(), exponent);
  if (exponent_text.empty() || ec == std::errc::invalid_argument || end != exponent_text.data() + exponent_text.size())
    fail(option, text, "has a malformed exponent (write 7e9 or 1.5e9; no suffix after it)");
  if (mantissa == 0) return 0;
  if (ec == std::errc::result_out_of_range) fail(option, text, "is larger than 64 bits can hold");
  if (exponent < fraction_digits) {
    const unsigned shift = fraction_digits - static_cast<unsigned>(exponent);
    // A nonzero mantissa below 2^64 < 10^20 divided by 10^20 or more leaves a fraction.
    if (shift > 19 || mantissa % pow_u64(10, shift) != 0) fail(option, text, "is not a whole number");
    return mantissa / pow_u64(10, shift);
  }
  std::uint64_t value = mantissa;
  for (std::uint64_t k = fraction_digits; k < exponent; ++k)  // at most 20 rounds before it overflows
    if (__builtin_mul_overflow(value, 10u, &value)) fail(option, text, "is larger than 64 bits can hold");
  return value;
}

// Parses "<digits>[.<digits>]<suffix>" exactly: the mantissa is kept as an integer with a count of
// fraction digits, so "1.1B" is 1,100,000,000 with no floating-point rounding.
std::uint64_t parse_scaled(std::string_view text, std::string_view option, bool binary) {
  if (text.empty()) fail(option, text, "is empty; expected a number such as 7B or 4096");
  std::size_t i = 0;
  std::uint64_t mantissa = 0;
  unsigned fraction_digits = 0;
  bool seen_digit = false, seen_point = false;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c == '.' && !seen_point) { seen_point = true; continue; }
    if (!std::isdigit(static_cast<unsigned char>(c))) break;
    seen_digit = true;
    std::uint64_t next = 0;
    if (__builtin_mul_overflow(mantissa, 10u, &next) || __builtin_add_overflow(next, std::uint64_t(c - '0'), &next))
      fail(option, text, "is larger than 64 bits can hold");
    mantissa = next;
    if (seen_point) ++fraction_digits;
  }
  if (!seen_digit) fail(option, text, "is not a number");
  std::string_view suffix = text.substr(i);
  // Parameter and token counts only: "1e9" is no sequence length one would write.
  if (!binary && !suffix.empty() && (suffix[0] == 'e' || suffix[0] == 'E')) return apply_exponent(mantissa, fraction_digits, suffix.substr(1), option, text);
  std::uint64_t multiplier = 1;
  if (!suffix.empty()) {
    if (binary && (suffix[0] == 'e' || suffix[0] == 'E'))
      fail(option, text, "is in scientific notation, which only parameter and token counts take: write the whole number, or "
                         "k, M, G or T (powers of 1024)");
    if (suffix.size() != 1) fail(option, text, "has an unknown suffix");
    char s = static_cast<char>(std::toupper(static_cast<unsigned char>(suffix[0])));
    if (binary) {
      if (s == 'K') multiplier = 1024;
      else if (s == 'M') multiplier = 1024ull * 1024;
      else if (s == 'G') multiplier = 1024ull * 1024 * 1024;
      else if (s == 'T') multiplier = 1024ull * 1024 * 1024 * 1024;
      else fail(option, text, "has an unknown suffix (use k, M, G or T, powers of 1024)");
    } else {
      if (s == 'K') multiplier = pow_u64(10, 3);
      else if (s == 'M') multiplier = pow_u64(10, 6);
      else if (s == 'B' || s == 'G') multiplier = pow_u64(10, 9);
      else if (s == 'T') multiplier = pow_u64(10, 12);
      else fail(option, text, "has an unknown suffix (use K, M, B or T)");
    }
  }
  std::uint64_t scaled = 0;
  if (__builtin_mul_overflow(mantissa, multiplier, &scaled)) fail(option, text, "is larger than 64 bits can hold");
  std::uint64_t divisor = pow_u64(10, fraction_digits > 19 ? 19 : fraction_digits);
  if (fraction_digits > 19 || scaled % divisor != 0) fail(option, text, "is not a whole number");
  return scaled / divisor;
}

}  // namespace

std::uint64_t parse_decimal_count(std::string_view text, std::string_view option) {
  std::uint64_t v = parse_scaled(text, option, false);
  if (v == 0) fail(option, text, "must be at least 1");
  return v;
}

std::uint64_t parse_binary_count(std::string_view text, std::string_view option) {
  std::uint64_t v = parse_scaled(text, option, true);
  if (v == 0) fail(option, text, "must be at least 1");
  return v;
}

std::uint64_t parse_integer(std::string_view text, std::string_view option, std::uint64_t min_value) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec == std::errc::invalid_argument || end != text.data() + text.size())
    fail(option, text, "is not a whole number");
  if (ec == std::errc::result_out_of_range) fail(option, text, "is larger than 64 bits can hold");
  if (v < min_value) fail(option, text, "must be at least " + std::to_string(min_value));
  return v;
}

namespace {

double parse_finite(std::string_view text, std::string_view option) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v))
    fail(option, text, "is not a number");
  return v;
}

}  // namespace

double parse_probability(std::string_view text, std::string_view option) {
  const double v = parse_finite(text, option);
  if (v < 0.0 || v >= 1.0) fail(option, text, "must be at least 0 and below 1");
  return v;
}

double parse_number_in(std::string_view text, std::string_view option, double min_value, double max_value) {
  const double v = parse_finite(text, option);
  if (v < min_value || v > max_value) fail(option, text, fmt::format("must be from {:g} to {:g}", min_value, max_value));
  return v;
}

}  // namespace trainplan
