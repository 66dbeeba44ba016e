#pragma once
// Writing a sweep: one row per configuration, CSV (RFC 4180 quoting) or JSON lines, with the `plan
// --json` field names. Rows are evaluated on worker threads in blocks (planner/search/sweep_runner.hpp),
// formatted there and written in order, so memory stays constant however large the sweep.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "planner/search/sweep.hpp"

namespace trainplan::cli {

enum class sweep_format { csv, jsonl };

const std::vector<std::string>& sweep_columns();
std::string csv_field(std::string_view text);  // quoted when it holds a comma, quote or line break
void append_row(fmt::memory_buffer& out, const sweep_result& r, sweep_format format);

struct sweep_stats {
  std::uint64_t rows = 0, fitting = 0, invalid = 0;
  std::uint64_t bytes_written = 0;
  double seconds = 0;
};

// Evaluates every configuration of `space` and writes it to `out` (header first for CSV). threads = 0
// uses every core. show_progress: a bar on stderr when it is a terminal (cli/progress.hpp). A failed write
// names `destination`; a reader that has gone throws output_closed (cli/output_file.hpp).
sweep_stats run_sweep(const sweep_space& space, sweep_format format, std::FILE* out, unsigned threads, bool show_progress,
                      bool replay, std::string_view destination = "the sweep");

}  // namespace trainplan::cli
