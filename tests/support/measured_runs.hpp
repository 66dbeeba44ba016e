#pragma once
// The shared H100 measurements of PyTorch + Hugging Face (tests/data/measurements/), read with the
// planner's own reader (planner/measure/measured_runs.hpp).
#include <fstream>
#include <sstream>
#include <string>

#include "planner/measure/measured_runs.hpp"

namespace trainplan::test {

using trainplan::measured_file;
using trainplan::measured_run;

inline measured_file read_measurements_at(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_measurements(text.str(), path);
}

inline measured_file read_measurements(const std::string& name) {
  return read_measurements_at(std::string(TRAINPLAN_TEST_DATA) + "/measurements/" + name);
}

// The project's own collector runs (data/measurements/, scripts/collect_hf.py on an H100, 2026-11-26):
// "extra" holds 13 configurations the profile was built without (Mistral and Qwen2 shapes, amp-fp16,
// gradient accumulation, s8192, LoRA); "gaps" S1, S5 and S10 of the shared 14 measured again with their
// allocator histories.
inline measured_file project_measurements(const std::string& name) {
  return read_measurements_at(std::string(TRAINPLAN_MEASUREMENTS) + "/" + name);
}

// The 14 configurations with their memory and step times.
inline measured_file shared_h100_measurements() { return read_measurements("pytorch-hf-h100-2026-11-22.jsonl"); }

// Two step times the shared README quotes for the same machine and stack (no memory figures).
inline measured_file shared_h100_step_times() { return read_measurements("pytorch-hf-h100-2026-11-22-step-times.jsonl"); }

}  // namespace trainplan::test
