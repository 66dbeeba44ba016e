// Sweep axes as typed (sweep_axis.hpp): comma-separated items, ranges with an additive or multiplicative
// step, and lists of names or probabilities.
#include "planner/util/sweep_axis.hpp"

#include <fmt/format.h>

#include "planner/util/input_error.hpp"
#include "planner/util/quantity_parse.hpp"

namespace trainplan {
namespace {

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t pos = text.find(sep, start);
    out.push_back(text.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// Numbers are read as `plan` reads one value (quantity_parse.hpp): "--seq '  512'" is refused in a sweep or a chart
// as it is by plan itself. Spaces may only follow a comma, as lists are written ("1, 2:4"); none before or after the
// whole list, none inside or after a number, and no tab or line break anywhere.
void refuse_blanks(std::string_view text, std::string_view option) {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
  bool after_comma = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (blank(c) && !(c == ' ' && after_comma && i + 1 < text.size()))
      throw input_error(fmt::format("{}: '{}' has a space{}; numbers take none (spaces may only follow a comma: 512, 1k)", option,
                                    text, c == ' ' ? "" : " or a control character"));
    if (c == ',') after_comma = true;
    else if (c != ' ') after_comma = false;
  }
}

}  // namespace

std::vector<std::uint64_t> parse_count_axis(std::string_view text, std::string_view option, bool decimal,
                                            std::size_t max_values) {
  auto count = [&](std::string_view s) {
    return decimal ? parse_decimal_count(s, option) : parse_binary_count(s, option);
  };
  if (trim(text).empty()) throw input_error(fmt::format("{}: empty list", option));
  refuse_blanks(text, option);
  std::vector<std::uint64_t> out;
  for (std::string_view raw : split(text, ',')) {
    const std::string_view item = trim(raw);  // spaces after the comma only: refuse_blanks refused any other
    if (item.empty()) throw input_error(fmt::format("{}: empty item in '{}'", option, text));
    const std::vector<std::string_view> parts = split(item, ':');
    if (parts.size() == 1) {
      out.push_back(count(item));
    } else if (parts.size() == 2 || parts.size() == 3) {
      const std::uint64_t start = count(parts[0]), stop = count(parts[1]);
      if (start > stop) throw input_error(fmt::format("{}: range '{}' is reversed (start above stop)", option, item));
      bool multiply = false;
      std::uint64_t step = 1;
      if (parts.size() == 3) {
        std::string_view s = parts[2];
        if (!s.empty() && (s.front() == 'x' || s.front() == 'X' || s.front() == '*')) multiply = true, s.remove_prefix(1);
        else if (!s.empty() && s.front() == '+') s.remove_prefix(1);
        step = s == "0" ? 0 : multiply ? parse_integer(s, fmt::format("{} step", option), 0) : count(s);
        if ((!multiply && step == 0) || (multiply && step < 2))
          throw input_error(fmt::format("{}: step '{}' in '{}' never advances", option, parts[2], item));
      }
      for (std::uint64_t v = start; v <= stop;) {
        out.push_back(v);
        if (out.size() > max_values) break;
        std::uint64_t next = 0;
        if (multiply ? __builtin_mul_overflow(v, step, &next) : __builtin_add_overflow(v, step, &next)) break;
        v = next;
      }
    } else {
      throw input_error(fmt::format("{}: '{}' is neither a value nor START:STOP[:STEP]", option, item));
    }
    if (out.size() > max_values)
      throw input_error(fmt::format("{}: more than {} values", option, max_values));
  }
  return out;
}

std::vector<std::string> parse_name_axis(std::string_view text, std::string_view option) {
  if (trim(text).empty()) throw input_error(fmt::format("{}: empty list", option));
  std::vector<std::string> out;
  for (std::string_view raw : split(text, ',')) {
    const std::string_view item = trim(raw);
    if (item.empty()) throw input_error(fmt::format("{}: empty item in '{}'", option, text));
    out.emplace_back(item);
  }
  return out;
}

std::vector<double> parse_probability_axis(std::string_view text, std::string_view option) {
  std::vector<double> out;
  const std::vector<std::string> items = parse_name_axis(text, option);  // refuses an empty list or item
  refuse_blanks(text, option);
  for (const std::string& item : items) out.push_back(parse_probability(item, option));
  return out;
}

}  // namespace trainplan
