// `plan check FILE...`: predicts every configuration a collector report measured (scripts/collect_hf.py,
// the format of tests/data/measurements/) with --framework hf, and prints predicted beside measured.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/format.hpp"
#include "cli/measurement_check.hpp"
#include "planner/catalog.hpp"
#include "planner/input_error.hpp"
#include "planner/measured_runs.hpp"
#include "planner/plan.hpp"
#include "planner/text_file.hpp"

namespace trainplan::cli {
namespace {

struct check_args {
  std::vector<std::string> files;
  std::string gpu = "h100";
  double tensor_tolerance_pct = 3.0, device_tolerance_pct = 5.0, time_tolerance_pct = 20.0;
};


double error_pct(double predicted, double measured) { return 100.0 * (predicted - measured) / measured; }

// CLI::Range lets NaN through (every comparison with NaN is false): "tolerance nan%" compared false with
// every error and failed the check with exit 1 instead of refusing the option.
void check_tolerance(double pct, const char* option, double max_pct) {
  if (!(pct >= 0 && pct <= max_pct))
    throw input_error(fmt::format("{} must be a percentage between 0 and {}", option, max_pct));
}

}  // namespace

int check_measurements(const std::vector<std::string>& files, const gpu_spec& gpu, const calibration& calib,
                       double tensor_tolerance_pct, double device_tolerance_pct, double time_tolerance_pct) {
  bool all_within = true;
  double worst_tensor = 0, worst_device = 0, worst_time = 0;
  for (const std::string& path : files) {
    const measured_file f = parse_measurements(read_text_file(path), path);
    fmt::print("{}: {}, torch {}, transformers {}; CUDA context {} as measured\n", path, f.gpu, f.torch,
               f.transformers, gib(f.context_bytes));
    fmt::print("  {:<10} {:>12} {:>12} {:>8}   {:>12} {:>12} {:>8}   {:>9} {:>9} {:>8}   {}\n", "run", "tensor peak",
               "predicted", "error", "device peak", "replayed", "error", "step", "predicted", "error", "configuration");
    for (const measured_run& r : f.runs) {
      const plan_result p = evaluate_plan(r.model, r.run, gpu, calib);
      const std::string what = fmt::format(
          "{} L={} h={} s={} b={} {} {}{}{}{}", family_name(r.model.family), r.model.layers, r.model.hidden, r.run.seq,
          r.run.micro_batch, precision_name(r.run.precision), r.run.attention == attention_kind::eager ? "eager" : "sdpa",
          r.run.recompute == recompute_mode::full ? " checkpointed" : "",
          r.run.optimizer_impl == optimizer_impl_kind::fused ? " fused" : "",
          r.run.expandable_segments ? " expandable-segments" : "");
      if (r.out_of_memory) {
        fmt::print("  {:<10} ran out of memory; plan says {} ({})\n", r.id, p.fits ? "it fits: WRONG" : "it does not fit",
                   what);
        all_within = all_within && !p.fits;
        continue;
      }
      const double ts = error_pct(p.time.step_seconds, r.step_seconds);
      worst_time = std::max(worst_time, std::abs(ts));
      all_within = all_within && std::abs(ts) <= time_tolerance_pct;
      if (!r.memory_measured) {  // a step time alone
        fmt::print("  {:<10} {:>12} {:>12} {:>8}   {:>12} {:>12} {:>8}   {:>7.1f}ms {:>7.1f}ms {:>+7.2f}%   {}\n", r.id, "-",
                   "-", "", "-", "-", "", r.step_seconds * 1e3, p.time.step_seconds * 1e3, ts, what);
        continue;
      }
      // What memory_allocated counts: the tensors and PyTorch's cuBLAS workspaces.
      const double tensor = static_cast<double>(p.tensor_peak_bytes + p.overhead.cublas_workspace_bytes);
      // max_memory_reserved() as the GPU's memory lets the allocator keep its cache (the same as the peak unless it
      // runs short there, when the peak is the least memory the run completes in)
      const double device = static_cast<double>(
          f.context_bytes + (p.allocator ? p.allocator->budget_reserved_bytes + p.overhead.cublas_workspace_bytes
                                         : p.peak_bytes - p.overhead.cuda_context_bytes));  // not replayed: the estimate
      const double measured_device = static_cast<double>(f.context_bytes + r.reserved_peak_bytes);
      const double te = error_pct(tensor, static_cast<double>(r.alloc_peak_bytes));
      const double de = error_pct(device, measured_device);
      worst_tensor = std::max(worst_tensor, std::abs(te));
      worst_device = std::max(worst_device, std::abs(de));
      all_within = all_within && std::abs(te) <= tensor_tolerance_pct && std::abs(de) <= device_tolerance_pct;
      fmt::print("  {:<10} {:>12} {:>12} {:>+7.2f}%   {:>12} {:>12} {:>+7.2f}%   {:>7.1f}ms {:>7.1f}ms {:>+7.2f}%   {}\n",
                 r.id, gib(r.alloc_peak_bytes), gib(static_cast<std::uint64_t>(tensor)), te,
                 gib(static_cast<std::uint64_t>(measured_device)), gib(static_cast<std::uint64_t>(device)), de,
                 r.step_seconds * 1e3, p.time.step_seconds * 1e3, ts, what);
    }
  }
  fmt::print("largest error: tensor peak {:.2f}% (tolerance {}%), device peak {:.2f}% (tolerance {}%), step time "
             "{:.2f}% (tolerance {}%): {}\n",
             worst_tensor, tensor_tolerance_pct, worst_device, device_tolerance_pct, worst_time, time_tolerance_pct,
             all_within ? "all within" : "NOT all within");
  return all_within ? 0 : 1;
}

void register_check_command(CLI::App& app, command_action& chosen) {
  auto args = std::make_shared<check_args>();
  CLI::App* cmd = app.add_subcommand(
      "check", "predict every run of a collector report (scripts/collect_hf.py) with --framework hf and compare "
               "(exit 0 all within tolerance, 1 otherwise)");
  cmd->add_option("files", args->files, "JSON-lines reports written by scripts/collect_hf.py")->required()->type_name("FILE");
  cmd->add_option("--gpu,-g", args->gpu, "the GPU the runs were measured on (default h100)")->type_name("NAME");
  cmd->add_option("--tensor-tolerance", args->tensor_tolerance_pct, "allowed tensor-peak error in percent (default 3)")
      ->type_name("PCT")->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--device-tolerance", args->device_tolerance_pct, "allowed device-peak error in percent (default 5)")
      ->type_name("PCT")->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--time-tolerance", args->time_tolerance_pct, "allowed step-time error in percent (default 20)")
      ->type_name("PCT")->check(CLI::Range(0.0, 1000.0));
  cmd->footer("Example: python3 scripts/collect_hf.py --preset shared-h100 -o mine.jsonl && plan check mine.jsonl");

  cmd->callback([args, &chosen]() {
    chosen = [args]() -> int {
      check_tolerance(args->tensor_tolerance_pct, "--tensor-tolerance", 100);
      check_tolerance(args->device_tolerance_pct, "--device-tolerance", 100);
      check_tolerance(args->time_tolerance_pct, "--time-tolerance", 1000);
      const catalog data = catalog::load();
      const gpu_spec& gpu = data.gpu(args->gpu);
      return check_measurements(args->files, gpu, data.calibration_for(gpu), args->tensor_tolerance_pct,
                                args->device_tolerance_pct, args->time_tolerance_pct);
    };
  });
}

}  // namespace trainplan::cli
