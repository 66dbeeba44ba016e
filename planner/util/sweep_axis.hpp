#pragma once
// Values of one sweep axis, as typed: comma-separated items, each a value or a range
// START:STOP[:STEP] with STEP "+N" (add, the default "+1") or "xN" (multiply). Ranges include STOP when a
// step lands on it: "512:32k:x2" is 512, 1024, ..., 32768.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trainplan {

// Counts (sequence lengths, batch sizes: k and M are powers of 1024 as in parse_binary_count; parameter
// counts with decimal=true: K/M/B/T powers of 1000). Throws input_error naming the option for empty
// items, spaces other than after a comma (" 512", "512 ", "1 :4": numbers read as one value is read; "512, 1k" is
// a list), reversed ranges, steps that never advance (+0, x1, x0), non-numbers, and more than max_values.
std::vector<std::uint64_t> parse_count_axis(std::string_view text, std::string_view option, bool decimal = false,
                                            std::size_t max_values = 1u << 20);

// Names (models, GPUs, precisions...): comma-separated, none empty.
std::vector<std::string> parse_name_axis(std::string_view text, std::string_view option);

// Probabilities in [0, 1), comma-separated; spaces only after a comma, as for counts.
std::vector<double> parse_probability_axis(std::string_view text, std::string_view option);

}  // namespace trainplan
