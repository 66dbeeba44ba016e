#pragma once
// Parsing of the numbers users type: "7B", "1.5T", "7e9", "4096", "4k", "0.1".
#include <cstdint>
#include <string_view>

namespace trainplan {

// Counts of parameters or tokens: K, M, B (or G), T are powers of 1000 ("1.5B" = 1,500,000,000); scientific
// notation is exact ("1.5e9" = 1,500,000,000).
// The result must be a whole number; anything else (empty, negative, trailing junk, a fraction that
// leaves a remainder, a value past 2^64-1) throws input_error naming `option`.
std::uint64_t parse_decimal_count(std::string_view text, std::string_view option);

// Sequence lengths, batch sizes and memory sizes: k, M, G, T are powers of 1024 ("4k" = 4096, "1M" =
// 1,048,576, "512G" = 512 GiB), as in "a 4k context". Must be a whole number of at least 1.
std::uint64_t parse_binary_count(std::string_view text, std::string_view option);

// A plain integer of at least `min_value` (layers, heads...).
std::uint64_t parse_integer(std::string_view text, std::string_view option, std::uint64_t min_value = 1);

// A probability in [0, 1) (dropout).
double parse_probability(std::string_view text, std::string_view option);

// A finite decimal number in [min_value, max_value] (a capacity factor).
double parse_number_in(std::string_view text, std::string_view option, double min_value, double max_value);

}  // namespace trainplan
