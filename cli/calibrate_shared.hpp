#pragma once
// What the three ways of `plan calibrate` share: the options, the calibration file's "source" text, the
// inputs read and the file -o updates. The harness's reports are fitted in calibrate_command.cpp, a collector's
// in calibrate_collector.cpp, a cluster's collectives in calibrate_cluster.cpp.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/io/catalog.hpp"
#include "planner/profiles/profile.hpp"
#include "planner/system/calibration.hpp"

namespace trainplan::cli {

struct calibrate_args {
  std::vector<std::string> inputs;
  std::string output, data_dir, framework, gpu = "h100";  // framework: empty = the harness
  bool json = false;
  bool held_out = false;  // --held-out: leave-one-out predictions beside the fit's residuals
  std::vector<std::string> device_only;  // --device-only: profiled reports whose busy times alone join a collector's fit
  std::vector<std::string> cluster_from;  // --cluster-from: collector reports with collectives, for a cluster's fit
  std::string cluster;                     // --cluster: the preset they were measured on (default: the GPU's usual one)
};

// A GPU's entry holds one "source": what each fit wrote there, "; "-separated, each part starting with its
// own prefix (and holding no "; " itself). A fit replaces its own part and keeps the other's (the harness's
// fit and a collector's, --framework NAME, fill different keys of the same entry).
constexpr std::string_view trainplan_source_prefix = "plan calibrate on ";
// A stack calibrated from its collector's reports: "plan calibrate --framework <name> on ".
std::string collector_source_prefix(const stack_profile& stack);
// The entry's "source" with this fit's part (starting with `own_prefix`) replaced by `own_text`, the others kept.
std::string merged_source(const nlohmann::json& entry, std::string_view own_prefix, const std::string& own_text);
// The inputs as a source names them: a folder as given, files grouped by their folder.
std::string describe_inputs(const std::vector<std::string>& inputs);
// The timing constants as calibration.json holds them.
nlohmann::json timing_json(const timing_constants& k);
// A report file, parsed; input_error naming it otherwise.
nlohmann::json read_json(const std::filesystem::path& path);
// The calibration file -o updates (the built-in one where it is no file yet), parsed with a nesting limit.
nlohmann::json parse_calibration_to_update(const std::string& path);

// `plan calibrate --framework NAME REPORT...`: a stack's CUDA context and step-time constants from its
// collector's reports. `gpu_named`: --gpu was given (it must then agree with the reports).
int calibrate_from_collector(const calibrate_args& args, const catalog& data, const stack_profile& stack, bool gpu_named);
// `plan calibrate --cluster-from REPORT...`: a cluster's effective bus bandwidths from timed collectives.
int calibrate_cluster(const calibrate_args& args, const catalog& data);

}  // namespace trainplan::cli
