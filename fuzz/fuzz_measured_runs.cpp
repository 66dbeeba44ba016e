// Fuzz target: measured-run reports in the collector's JSON-lines format (planner/measure/measured_runs.hpp,
// parse_measurements), as `plan check` and `plan calibrate` read a collector's reports. Any text must parse
// or throw input_error. A file that parses must have at least one run, none of them the env line, and
// every run a model validate_model accepts, a dropout within [0, 1) and segments of 1 to 2^50 bytes, summing
// to at most 2^50.
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz_check.hpp"
#include "planner/measure/measured_runs.hpp"

using namespace trainplan;
using trainplan::fuzz::require;
using trainplan::fuzz::returns_or_input_error;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  measured_file f;
  if (!returns_or_input_error([&] { f = parse_measurements(text, "report.jsonl"); })) return 0;
  require(!f.runs.empty(), "a report without runs was accepted");
  for (const measured_run& r : f.runs) {
    require(returns_or_input_error([&] { validate_model(r.model); }), "a run's model fails validate_model");
    require(r.run.dropout >= 0 && r.run.dropout < 1, "a run's dropout is outside [0, 1)");
    require(r.id != "env", "the env line was read as a run");
    std::uint64_t total = 0;
    for (const measured_segment& seg : r.segments) {
      require(seg.bytes > 0 && seg.bytes <= (1ull << 50), "a segment of no size, or more than 2^50 bytes, was accepted");
      total += seg.bytes;
      require(total <= (1ull << 50), "segments summing to more than 2^50 bytes were accepted");
    }
  }
  return 0;
}
