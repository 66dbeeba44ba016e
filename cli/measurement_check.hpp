#pragma once
// Predicts every run of collector reports (scripts/collect_hf.py) as the stack each measured (its env line's, or
// the collector's: unlabelled_report_profile) and prints prediction beside measurement (`plan check`, and
// `plan calibrate --framework NAME` after it sets the context).
#include <functional>
#include <string>
#include <vector>

#include "planner/io/catalog.hpp"
#include "planner/measure/measured_runs.hpp"
#include "planner/system/calibration.hpp"
#include "planner/system/gpu_spec.hpp"

namespace trainplan::cli {

// The GPU a report's runs are predicted on, and the calibration they are predicted with.
struct check_target {
  const gpu_spec* gpu = nullptr;
  calibration calib;
};
using check_target_for = std::function<check_target(const measured_file& f, const std::string& path)>;

// The GPU a collector report was measured on: the entry of gpus.json whose device_names hold its env line's
// "gpu" (torch.cuda.get_device_name). `gpu_option` (--gpu; empty: not given) must be that entry, and names the
// GPU where gpus.json knows none by that name. Throws input_error otherwise: a report of an RTX 4090 is not
// checked against an H100.
const gpu_spec& report_gpu(const catalog& data, const measured_file& f, const std::string& path,
                           const std::string& gpu_option);

// 0 when every tensor peak, device peak and step time is within its tolerance (percent), 1 otherwise;
// throws input_error for a malformed report. With `segments_jsonl`, appends the replay's segments of every
// run (plan check --segments-out).
int check_measurements(const std::vector<std::string>& files, const check_target_for& target_for,
                       double tensor_tolerance_pct, double device_tolerance_pct, double time_tolerance_pct,
                       std::string* segments_jsonl = nullptr, bool one_process = false);

// The same comparison printed as one JSON object (plan check --json; docs/json.md); the same exit status.
int check_measurements_json(const std::vector<std::string>& files, const check_target_for& target_for,
                            double tensor_tolerance_pct, double device_tolerance_pct, double time_tolerance_pct,
                            bool one_process);

}  // namespace trainplan::cli
