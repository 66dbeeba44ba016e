#pragma once
// The committed measurements, read with the planner's own reader (planner/measure/measured_runs.hpp): the shared
// H100 file of PyTorch + Hugging Face (tests/data/measurements/), the project's own collector runs
// (data/measurements/) and the harness's reports (reports/). Every way in goes through a folder below, which
// requires the running case to be tagged [measured] (tests/support/labels.hpp): such cases are ctest's measured
// label, not the fast unit set.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "planner/measure/measured_runs.hpp"
#include "tests/support/labels.hpp"

namespace trainplan::test {

using trainplan::measured_file;
using trainplan::measured_run;

// tests/data/measurements/: the shared H100 file, its quoted step times, and the allocator traces made from the
// collector's recorded histories (scripts/allocator_trace_from_history.py).
inline std::string shared_measurements_dir() {
  require_tag("measured", "reads tests/data/measurements/");
  return std::string(TRAINPLAN_TEST_DATA) + "/measurements";
}

// data/measurements/: the project's own collector runs (scripts/collect_hf.py on an H100).
inline std::string project_measurements_dir() {
  require_tag("measured", "reads data/measurements/");
  return TRAINPLAN_MEASUREMENTS;
}

// reports/: the harness's own runs on a GPU (plan validate, plan bench).
inline std::string reports_dir() {
  require_tag("measured", "reads reports/");
  return TRAINPLAN_REPORTS;
}

inline measured_file read_measurements_at(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_measurements(text.str(), path);
}

inline measured_file read_measurements(const std::string& name) {
  return read_measurements_at(shared_measurements_dir() + "/" + name);
}

// The project's own collector runs (data/measurements/, scripts/collect_hf.py on an H100, 2026-11-26 and -27).
inline measured_file project_measurements(const std::string& name) {
  return read_measurements_at(project_measurements_dir() + "/" + name);
}

// Every collector report of the project's (data/measurements/*.jsonl), by file name, in name order.
inline std::vector<std::string> project_measurement_files() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(project_measurements_dir()))
    if (entry.path().extension() == ".jsonl") names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// The 14 configurations with their memory and step times.
inline measured_file shared_h100_measurements() { return read_measurements("pytorch-hf-h100-2026-11-22.jsonl"); }

// Two step times the shared README quotes for the same machine and stack (no memory figures).
inline measured_file shared_h100_step_times() { return read_measurements("pytorch-hf-h100-2026-11-22-step-times.jsonl"); }

// The run of `f` with that id, or nullptr: the same configuration measured in another file (a join, never a
// condition on which run it is).
inline const measured_run* same_run_in(const measured_file& f, const std::string& id) {
  for (const measured_run& r : f.runs)
    if (r.id == id) return &r;
  return nullptr;
}

}  // namespace trainplan::test
