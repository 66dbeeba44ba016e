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

inline measured_file shared_h100_measurements() {
  const std::string path = std::string(TRAINPLAN_TEST_DATA) + "/measurements/pytorch-hf-h100-2026-11-22.jsonl";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_measurements(text.str(), path);
}

}  // namespace trainplan::test
