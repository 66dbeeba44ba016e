// What the ways of `plan calibrate` share (calibrate_shared.hpp): the calibration file's source text, the
// reports read and the file -o updates.
#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <fstream>
#include <sstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <type_traits>

#include "planner/profiles/registry.hpp"
#include "cli/bench_run.hpp"
#include "cli/output_file.hpp"
#include "cli/calibrate_shared.hpp"
#include "cli/commands.hpp"
#include "cli/format.hpp"
#include "cli/measurement_check.hpp"
#include "planner/measure/calibration_fit.hpp"
#include "planner/measure/cluster_fit.hpp"
#include "planner/measure/collector_fit.hpp"
#include "planner/measure/measured_runs.hpp"
#include "planner/io/catalog.hpp"
#include "planner/io/embedded_data.hpp"
#include "planner/util/input_error.hpp"
#include "planner/util/names.hpp"
#include "planner/util/text_file.hpp"
#include "planner/evaluate/plan.hpp"
#include "planner/measure/timing_fit.hpp"

namespace trainplan::cli {

using json = nlohmann::json;

json timing_json(const timing_constants& k) {
  return {{"gemm_efficiency", k.gemm_efficiency},       {"gemm_half_dim", k.gemm_half_dim},
          {"fp32_gemm_efficiency", k.fp32_gemm_efficiency},
          {"attention_efficiency", k.attention_efficiency}, {"bandwidth_fraction", k.bandwidth_fraction},
          {"kernel_seconds", k.kernel_seconds},         {"step_seconds", k.step_seconds},
          {"foreach_tensor_seconds", k.foreach_tensor_seconds},
          {"forward_kernel_seconds", k.forward_kernel_seconds}, {"backward_kernel_seconds", k.backward_kernel_seconds}};
}

// A stack calibrated from its collector's reports: "plan calibrate --framework <name> on ".
std::string collector_source_prefix(const stack_profile& stack) {
  return fmt::format("plan calibrate --framework {} on ", stack.name);
}

std::string merged_source(const json& entry, std::string_view own_prefix, const std::string& own_text) {
  std::string merged = own_text;
  if (!entry.contains("source") || !entry["source"].is_string()) return merged;
  const std::string old = entry["source"].get<std::string>();
  for (std::size_t begin = 0; begin <= old.size();) {
    std::size_t end = old.find("; ", begin);
    if (end == std::string::npos) end = old.size();
    const std::string_view part = std::string_view(old).substr(begin, end - begin);
    if (!part.empty() && !part.starts_with(own_prefix)) merged += fmt::format("; {}", part);
    begin = end + 2;
  }
  return merged;
}

// The inputs as a source names them: a folder as given, files grouped by their folder ("DIR/ (20 of its 21
// reports)"), so that a fit from most of a folder's reports stays one readable line and says what it left out.
std::string describe_inputs(const std::vector<std::string>& inputs) {
  struct group {
    std::string name;  // a folder given as such, or the folder of files given one by one
    int files = 0;     // 0: a folder given as such
    std::string first;  // the first file of the folder given
  };
  std::vector<group> groups;
  for (const std::string& input : inputs) {
    const std::filesystem::path path(input);
    if (std::filesystem::is_directory(path)) {
      groups.push_back({input, 0, ""});
      continue;
    }
    const std::string folder = path.parent_path().string();
    auto it = std::find_if(groups.begin(), groups.end(), [&](const group& g) { return g.files > 0 && g.name == folder; });
    if (it == groups.end()) groups.push_back({folder, 1, input});
    else ++it->files;
  }
  std::string out;
  for (const group& g : groups) {
    if (!out.empty()) out += ", ";
    if (g.files == 0) out += g.name;
    else if (g.files == 1) out += g.first;  // one file of that folder, by its whole path
    else {  // how many of the folder's reports: a fit that left some out says so
      const std::filesystem::path folder = g.name.empty() ? "." : g.name;
      std::error_code ec;
      int reports = 0;
      for (const auto& e : std::filesystem::directory_iterator(folder, ec))
        if (e.path().extension() == ".json") ++reports;
      out += fmt::format("{}/ ({} of its {} reports)", folder.string(), g.files, reports);
    }
  }
  return out;
}

json read_json(const std::filesystem::path& path) {
  try {
    return json::parse(read_text_file(path));
  } catch (const json::exception& e) {  // syntax, and numbers out of range such as 1e400
    throw input_error(fmt::format("{}: not valid JSON ({})", path.string(), e.what()));
  }
}

// The calibration file -o updates: the file when it is a regular one, else the built-in one.
std::string calibration_text_of(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) return read_text_file(path, file_use::updated);
  for (const embedded_file& f : embedded_data_files())
    if (f.name == "calibration.json") return std::string(f.bytes);
  throw input_error("calibration.json: not embedded in this build");
}

// The calibration file -o updates, parsed. It is written back with dump(), which recurses once per nesting
// level: a document nested deeper than any calibration file (the built-in one has 3 levels) is refused
// rather than overflowing the stack.
json parse_calibration_to_update(const std::string& path) {
  constexpr int max_depth = 64;
  const json::parser_callback_t limit = [&](int depth, json::parse_event_t, json&) {
    if (depth > max_depth) throw input_error(fmt::format("{}: nested more than {} levels deep", path, max_depth));
    return true;
  };
  return json::parse(calibration_text_of(path), limit);
}

}  // namespace trainplan::cli
