#pragma once
// Numeric options bound to a variable read their text through planner/util/quantity_parse before CLI11 converts
// it, so that every number `plan` takes reads one way: decimal digits only (CLI11 alone takes "0x10" as 16, " 5"
// as 5 and "-1" as the largest unsigned value), within the option's range, and a bad one is a one-line input_error
// naming the option (exit 2), as for the options taken as strings.
//
//   cmd->add_option("--top", args->top, "...")->type_name("N")->check(whole_number("--top", 1));
#include <cstdint>
#include <limits>
#include <string>

#include <CLI/CLI.hpp>

namespace trainplan::cli {

// A whole number from min_value to max_value ("--top 0": "--top: '0' must be at least 1").
CLI::Validator whole_number(std::string option, std::uint64_t min_value = 1,
                            std::uint64_t max_value = std::numeric_limits<std::uint64_t>::max());

// A finite decimal number from min_value to max_value (a percentage: number_in("--tolerance", 0, 100)).
CLI::Validator number_in(std::string option, double min_value, double max_value);

// A fraction at least 0 and below 1 (a share of the GPU's memory kept free).
CLI::Validator fraction_below_one(std::string option);

}  // namespace trainplan::cli
