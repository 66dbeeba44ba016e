#pragma once
// The shared H100 measurements of PyTorch + Hugging Face (tests/data/measurements/), read with the
// planner's own reader (planner/measured_runs.hpp).
#include <fstream>
#include <sstream>
#include <string>

#include "planner/measured_runs.hpp"

namespace trainplan::test {

using trainplan::measured_file;
using trainplan::measured_run;

inline measured_file read_measurements(const std::string& name) {
  const std::string path = std::string(TRAINPLAN_TEST_DATA) + "/measurements/" + name;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_measurements(text.str(), path);
}

// The 14 configurations with their memory and step times.
inline measured_file shared_h100_measurements() { return read_measurements("pytorch-hf-h100-2026-11-22.jsonl"); }

// Two step times the shared README quotes for the same machine and stack (no memory figures).
inline measured_file shared_h100_step_times() { return read_measurements("pytorch-hf-h100-2026-11-22-step-times.jsonl"); }

}  // namespace trainplan::test
