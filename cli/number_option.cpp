// Numeric options checked by quantity_parse (number_option.hpp). A validator's message would be prefixed with
// the option's name by CLI11 and printed with "(see plan --help)"; the input_error thrown here passes through
// CLI11's parse untouched and reads as every other bad number does.
#include "cli/number_option.hpp"

#include <fmt/format.h>

#include "planner/util/input_error.hpp"
#include "planner/util/quantity_parse.hpp"

namespace trainplan::cli {

CLI::Validator whole_number(std::string option, std::uint64_t min_value, std::uint64_t max_value) {
  return CLI::Validator(
      [option, min_value, max_value](std::string& text) -> std::string {
        const std::uint64_t v = parse_integer(text, option, min_value);
        if (v > max_value) throw input_error(fmt::format("{}: '{}' must be at most {}", option, text, max_value));
        return {};
      },
      "");
}

CLI::Validator number_in(std::string option, double min_value, double max_value) {
  return CLI::Validator(
      [option, min_value, max_value](std::string& text) -> std::string {
        parse_number_in(text, option, min_value, max_value);
        return {};
      },
      "");
}

CLI::Validator fraction_below_one(std::string option) {
  return CLI::Validator(
      [option](std::string& text) -> std::string {
        parse_probability(text, option);
        return {};
      },
      "");
}

}  // namespace trainplan::cli
