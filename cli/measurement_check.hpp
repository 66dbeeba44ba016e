#pragma once
// Predicts every run of collector reports (scripts/collect_hf.py) as the stack each measured (its env line's, or
// the collector's: unlabelled_report_profile) and prints prediction beside measurement (`plan check`, and
// `plan calibrate --framework NAME` after it sets the context).
#include <string>
#include <vector>

#include "planner/system/calibration.hpp"
#include "planner/system/gpu_spec.hpp"

namespace trainplan::cli {

// 0 when every tensor peak, device peak and step time is within its tolerance (percent), 1 otherwise;
// throws input_error for a malformed report. With `segments_jsonl`, appends the replay's segments of every
// run (plan check --segments-out).
int check_measurements(const std::vector<std::string>& files, const gpu_spec& gpu, const calibration& calib,
                       double tensor_tolerance_pct, double device_tolerance_pct, double time_tolerance_pct,
                       std::string* segments_jsonl = nullptr, bool one_process = false);

// The same comparison printed as one JSON object (plan check --json; docs/json.md); the same exit status.
int check_measurements_json(const std::vector<std::string>& files, const gpu_spec& gpu, const calibration& calib,
                            double tensor_tolerance_pct, double device_tolerance_pct, double time_tolerance_pct,
                            bool one_process);

}  // namespace trainplan::cli
