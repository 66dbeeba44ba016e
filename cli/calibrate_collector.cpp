// `plan calibrate --framework NAME REPORT...` (calibrate_shared.hpp): a stack's CUDA context and step-time
// constants fitted to its collector's reports (planner/measure/collector_fit.hpp).
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

// Collector reports (scripts/collect_hf.py) of `stack`: its CUDA context, then its step-time constants, fitted
// (planner/measure/collector_fit.hpp) and written into the GPU's entry; every run is then predicted beside its
// measurement (plan check's table).
int calibrate_from_collector(const calibrate_args& args, const catalog& data, const stack_profile& stack, bool gpu_named) {
  std::vector<measured_file> files;
  for (const std::string& path : args.inputs) {
    files.push_back(parse_measurements(read_text_file(path), path));
    if (files.back().stack != &stack)
      throw input_error(fmt::format("calibrate --framework {}: {} measured --framework {}", stack.name, path,
                                    files.back().stack->name));
  }
  // The reports' GPU, from their env lines (--gpu, when given, must agree): one GPU at a time.
  const gpu_spec& g = report_gpu(data, files.front(), args.inputs.front(), gpu_named ? args.gpu : std::string());
  for (std::size_t i = 1; i < files.size(); ++i) report_gpu(data, files[i], args.inputs[i], g.name);
  const collector_context_fit context = fit_collector_context(files, data.calibration_for(g), stack.name);
  fmt::print("plan calibrate --framework {}: {} ({}): the stack's CUDA context {} (was {})\n\n", stack.name, g.name,
             g.description, gib(context.context_bytes), gib(context.before_bytes));
  std::vector<measured_file> device_only;
  for (const std::string& path : args.device_only) device_only.push_back(parse_measurements(read_text_file(path), path));
  const collector_timing_fit timing = fit_collector_timing(files, device_only, g, context.fitted, stack.name);
  const calibration& c = timing.fitted;
  const timing_fit& fit = timing.timing;
  const std::vector<timing_observation>& timed = timing.timed;
  const std::size_t device_only_runs = timing.device_only_runs;
  const timing_constants& k = fit.constants;
  fmt::print("Step time ({} profile): GEMMs at {} (fp32: {}) x m/(m+{:.0f}) x n/(n+{:.0f}) x k/(k+{:.0f}) of peak, attention {}, "
             "bandwidth {}, {:.2f} us between kernels; host {:.3f} ms per step, {:.2f} us per forward and {:.2f} us per "
             "backward launch, {:.1f} us per foreach tensor: over {} runs the median error is {:.1f}%, the largest {:.1f}%\n\n",
             stack.name, percent(k.gemm_efficiency), percent(k.fp32_gemm_efficiency), k.gemm_half_dim, k.gemm_half_dim,
             k.gemm_half_dim, percent(k.attention_efficiency), percent(k.bandwidth_fraction), k.kernel_seconds * 1e6,
             k.step_seconds * 1e3, k.forward_kernel_seconds * 1e6, k.backward_kernel_seconds * 1e6,
             k.foreach_tensor_seconds * 1e6, timing.step_time_runs(), fit.median_error_pct, fit.max_error_pct);
  if (device_only_runs > 0)
    fmt::print("(with the GPU's busy times of {} profiled run{} of --device-only, whose step times are not fitted)\n\n",
               device_only_runs, device_only_runs == 1 ? "" : "s");
  if (args.held_out) {
    const held_out_fit held = fit_held_out(timed);
    fmt::print("Held out (each run predicted by the constants fitted on the other {}):\n", timed.size() - 1);
    for (std::size_t i = 0; i < timed.size(); ++i)
      if (timed[i].measured_seconds > 0)
        fmt::print("  {:<10} measured {:>9.1f} ms, held out {:>9.1f} ms, {:>+7.2f}%\n", timed[i].label,
                 timed[i].measured_seconds * 1e3, held.predicted_seconds[i] * 1e3, held.error_pct[i]);
    fmt::print("  median error {:.1f}%, largest {:.1f}%\n\n", held.median_error_pct, held.max_error_pct);
  }
  const int verdict = check_measurements(
      args.inputs, [&](const measured_file&, const std::string&) { return check_target{&g, c}; }, 3.0, 5.0, 20.0);
  if (!args.output.empty()) {
    json doc;
    try {
      doc = parse_calibration_to_update(args.output);
    } catch (const json::exception& e) {
      throw input_error(fmt::format("{}: not valid JSON ({})", args.output, e.what()));
    }
    if (!doc.is_object() || (doc.contains("gpus") && !doc["gpus"].is_object()) ||
        (doc.contains("gpus") && doc["gpus"].contains(g.name) && !doc["gpus"][g.name].is_object()))
      throw input_error(fmt::format("{}: not a calibration file (an object with a \"gpus\" object)", args.output));
    json& entry = doc["gpus"][g.name];
    if (entry.contains("profiles") && (!entry["profiles"].is_object() ||
                                       (entry["profiles"].contains(stack.name) && !entry["profiles"][std::string(stack.name)].is_object())))
      throw input_error(fmt::format("{}: gpus.{}.profiles is not an object of objects", args.output, g.name));
    json& own_entry = entry["profiles"][std::string(stack.name)];
    own_entry["cuda_context_bytes"] = context.context_bytes;
    own_entry["timing"] = timing_json(k);
    auto names_of = [](const std::vector<std::string>& paths) {
      std::string names;
      for (const std::string& path : paths) names += (names.empty() ? "" : ", ") + std::filesystem::path(path).filename().string();
      return names;
    };
    const std::string busy = device_only_runs == 0 ? std::string()
                                                   : fmt::format(", and the GPU busy times of {} ({} runs)",
                                                                 names_of(args.device_only), device_only_runs);
    const std::string prefix = collector_source_prefix(stack);
    entry["source"] = merged_source(entry, prefix,
                                    fmt::format("{}{} ({} runs){}: the stack's CUDA context and step-time constants", prefix,
                                                names_of(args.inputs), timing.step_time_runs(), busy));
    const std::string text = doc.dump(2) + "\n";
    catalog check = data;
    check.apply_calibration(text, false);  // never write what the loader would reject
    write_output(args.output, text);
    fmt::print("Wrote the {} entry's {} context and timing constants to {}\n", g.name, stack.name, args.output);
  }
  return verdict;
}

}  // namespace trainplan::cli
