// `plan validate`: runs real training steps on a backend and compares what they keep in memory with the
// planner's prediction. Exit 0 when within tolerance, 1 when not, 2 for bad input.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.hpp"
#include "cli/format.hpp"
#include "cli/model_run_options.hpp"
#include "cli/number_option.hpp"
#include "cli/output_file.hpp"
#include "cli/progress.hpp"
#include "cli/validate_report.hpp"
#include "planner/evaluate/plan.hpp"
#include "planner/io/catalog.hpp"
#include "planner/measure/validation_runs.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/util/input_error.hpp"
#include "planner/util/quantity_parse.hpp"
#include "validate/validation.hpp"

#include "cli/cuda_backend.hpp"

namespace trainplan::cli {
namespace {

struct validate_args {
  model_run_args model_run;
  std::string backend = "cpu";
  std::string steps = "2", seed = "1234";
  double tolerance_pct = 0.5;
  bool json = false, no_report = false, force = false;
  std::string report_dir = "reports", timeline_csv, suite;
};

// The CPU backend runs every FLOP with scalar reference kernels (about a GFLOP/s): beyond these it
// would run for many minutes or exhaust memory, which is rarely what someone who typed a 7B model wants.
constexpr double cpu_flops_limit = 2e11;
constexpr int exit_out_of_memory = 4;
constexpr std::uint64_t cpu_bytes_limit = 8ull << 30;
constexpr std::uint64_t max_validate_steps = 1000;  // the most --steps a validate run takes

void write_file(const std::filesystem::path& path, const std::string& text) { write_output(path.string(), text); }

std::string timestamp() { return utc_now("%Y%m%d-%H%M%S"); }

int run_suite(const validate_args& args) {
  if (args.suite != "gpu") throw input_error(fmt::format("--suite: unknown suite '{}' (known: gpu)", args.suite));
  const kernels::cuda::backend_api& backend = cuda_backend("--suite gpu");
  const catalog data = catalog::load(args.model_run.data_dir.empty() ? std::nullopt
                                                                      : std::optional<std::filesystem::path>(args.model_run.data_dir));
  const gpu_spec& gpu = data.gpu(args.model_run.gpu);
  const calibration calib = data.calibration_for(gpu);
  const std::filesystem::path dir = std::filesystem::path(args.report_dir) / fmt::format("{}-{}", gpu.name, today());
  std::string summary = fmt::format("# GPU suite on {} ({}), {}\n\n| run | tensor peak predicted | measured | delta | "
                                    "device peak predicted | measured | step s predicted | measured | result |\n"
                                    "|---|---:|---:|---:|---:|---:|---:|---:|---|\n",
                                    backend.device_name(), gpu.name, today());
  int agreed = 0, total = 0;
  const std::vector<validation_case> cases = gpu_validation_suite(data, gpu, calib);
  for (const validation_case& c : cases) {
    ++total;
    validate::training_options options;
    options.steps = 3;
    validate::device_measurements device;
    device.name = backend.device_name();
    device.workspace_bytes = 32u << 20;
    const plan_result plan = evaluate_plan(c.model, c.run, gpu, calib);
    std::string result;
    try {
      const validate::validation_result v = validate::validate_on(backend.kernel_table(), c.model, c.run, options, &device);
      const validate_report_input in{c.model, c.run, v, args.tolerance_pct, v.passed(args.tolerance_pct), gpu.name};
      std::string stem;
      for (char ch : c.label) stem += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '-';
      write_file(dir / (stem + ".json"), render_validate_json(in).dump(2) + "\n");
      write_file(dir / (stem + ".md"), render_validate_markdown(in));
      result = c.expect_fit ? (in.passed ? "fits, as predicted" : "fits; tensors differ") : "fits, predicted not to";
      agreed += c.expect_fit && in.passed;
      summary += fmt::format("| {} | {} | {} | {:+.2f}% | {} | {} | {:.4f} | {:.4f} | {} |\n", c.label, grouped(v.predicted_peak_bytes),
                             grouped(v.measured_peak_bytes), v.delta_pct, grouped(plan.peak_bytes),
                             grouped(v.device->device_peak_bytes), plan.time.step_seconds, v.device->step_seconds, result);
    } catch (const validate::out_of_memory& oom) {
      result = c.expect_fit ? "OUT OF MEMORY, predicted to fit" : "out of memory, as predicted";
      agreed += !c.expect_fit;
      summary += fmt::format("| {} | {} | - | - | {} | - | - | - | {} at {} |\n", c.label, grouped(plan.tensor_peak_bytes),
                             grouped(plan.peak_bytes), result, oom.phase_label);
    }
    fmt::print("{:<55} {}\n", c.label, result);
    std::fflush(stdout);
    // The table so far, after every run: a session cut off by its time limit keeps what it measured.
    write_file(dir / "suite.md", summary + fmt::format("\n{} of {} runs so far.\n", total, cases.size()));
  }
  summary += fmt::format("\nThe GPU agreed with the planner on {} of {} runs. Fit the calibration with: plan calibrate {}\n",
                         agreed, total, dir.string());
  write_file(dir / "suite.md", summary);
  fmt::print("The GPU agreed with the planner on {} of {} runs; reports in {}\n", agreed, total, dir.string());
  return agreed == total ? 0 : 1;
}

}  // namespace

void register_validate_command(CLI::App& app, command_action& chosen) {
  auto args = std::make_shared<validate_args>();
  CLI::App* cmd = app.add_subcommand(
      "validate", "run real training steps and compare measured memory with the prediction (exit 0 pass, 1 fail, 4 out of memory)");
  args->model_run.framework = std::string(harness_profile().name);  // the harness is what validate runs and compares
  add_model_run_options(*cmd, args->model_run);
  cmd->add_option("--backend", args->backend, "cpu (default) or cuda (needs a GPU; reports device memory and step time)")
      ->type_name("NAME");
  cmd->add_option("--steps", args->steps, "optimizer steps to run (default 2: step 2 is the steady state; at most 1000)")->type_name("N");
  cmd->add_option("--seed", args->seed, "seed for weights, data and dropout (default 1234)")->type_name("N");
  cmd->add_option("--tolerance", args->tolerance_pct, "allowed |measured - predicted| peak, in percent (default 0.5)")
      ->type_name("PCT")
      ->check(number_in("--tolerance", 0, 100));
  cmd->add_flag("--json", args->json, "print the report as one JSON object");
  cmd->add_option("--report-dir", args->report_dir, "folder for the JSON and Markdown reports (default reports)")
      ->type_name("DIR");
  cmd->add_flag("--no-report", args->no_report, "write no report files");
  cmd->add_option("--timeline-csv", args->timeline_csv, "write live bytes per event (predicted, measured) as CSV")
      ->type_name("FILE");
  cmd->add_flag("--force", args->force, "run even when the CPU backend would take very long");
  cmd->add_option("--suite", args->suite, "gpu: the CUDA matrix sized to the GPU, into <report-dir>/<gpu>-<date>/")
      ->type_name("NAME");

  cmd->callback([args, &chosen]() {
    chosen = [args]() -> int {
      if (&profile_named(args->model_run.framework) != &harness_profile())
        throw input_error(fmt::format("validate runs this project's harness: --framework {}, not {}", harness_profile().name,
                                      args->model_run.framework));
      if (!args->suite.empty()) return run_suite(*args);
      resolved_run r = resolve_model_run(args->model_run);
      const kernels::kernel_ops* ops = &kernels::cpu_kernel_ops();
      std::optional<validate::device_measurements> device;
      if (args->backend == "cuda") {
        const kernels::cuda::backend_api& gpu = cuda_backend("--backend cuda");
        ops = &gpu.kernel_table();
        device = validate::device_measurements{};
        device->name = gpu.device_name();
        device->workspace_bytes = 32u << 20;  // the workspace kernels/cuda/runtime.cu sets on its cuBLAS handle
      } else if (args->backend != "cpu") {
        throw input_error(fmt::format("--backend: unknown backend '{}' (known: cpu, cuda)", args->backend));
      }
      validate::training_options options;
      const std::uint64_t steps = parse_integer(args->steps, "--steps");
      // The prediction is for step 2, the first with optimizer state: one step cannot be compared with it.
      if (steps < 2) throw input_error("--steps must be at least 2: the prediction is for step 2, the first with optimizer state");
      // Memory reaches its steady state at step 2: more steps only add run time. A larger count is refused,
      // not silently cut to the limit.
      if (steps > max_validate_steps)
        throw input_error(fmt::format("--steps {} is more than the {} steps validate runs at most", steps, max_validate_steps));
      options.steps = static_cast<int>(steps);
      options.seed = parse_integer(args->seed, "--seed", 0);
      validate::check_harness_supports(r.model, r.run);

      const validation_cost cost = validation_run_cost(r.model, r.run, static_cast<std::uint64_t>(options.steps));
      const std::uint64_t predicted_peak = cost.tensor_peak_bytes;
      const double flops = cost.hardware_flops;
      if (!args->force && !device && (flops > cpu_flops_limit || predicted_peak > cpu_bytes_limit))
        throw input_error(fmt::format(
            "the CPU backend would run {:.2g} FLOPs over {} of buffers; use a small shape (e.g. --layers 2 --hidden 64 "
            "--heads 4 --vocab 256 --seq 64) or pass --force",
            flops, gib(predicted_peak)));

      // The outputs are checked before the run (a folder, a read-only file): not found wrong only after it.
      std::optional<output_file> timeline_out;
      if (!args->timeline_csv.empty()) timeline_out.emplace(args->timeline_csv);
      validate::validation_result result;
      try {
        progress bar(fmt::format("plan validate: {} steps on the {} backend", options.steps, args->backend));
        result = validate::validate_on(*ops, r.model, r.run, options, device ? &*device : nullptr);
      } catch (const validate::out_of_memory& oom) {
        // Out of memory is a result: every buffer was freed on the way out.
        fmt::print("OUT OF MEMORY on the {} backend at {}: {} ({}) could not be allocated ({})\n", args->backend,
                   oom.phase_label, oom.buffer_name, grouped(oom.requested_bytes), oom.what());
        fmt::print("The planner predicted a peak of {} tensor bytes for this configuration.\n", grouped(predicted_peak));
        return exit_out_of_memory;
      }
      const bool passed = result.passed(args->tolerance_pct);
      const validate_report_input in{r.model, r.run, result, args->tolerance_pct, passed, r.gpu.name};

      std::string written;
      if (!args->no_report) {
        const run_config& c = r.run;
        const std::string stem = fmt::format("validate-{}-{}-s{}-b{}-a{}-{}-{}-{}-{}", result.backend, r.model.name, c.seq,
                                             c.micro_batch, c.grad_accum, precision_name(c.precision),
                                             recompute_name(c.recompute), attention_name(c.attention), timestamp());
        std::string safe_stem;
        for (char ch : stem) safe_stem += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '.') ? ch : '_';
        // Never overwrite a report: runs within the same second get -2, -3...
        std::filesystem::path base = std::filesystem::path(args->report_dir) / safe_stem;
        for (int n = 2; std::filesystem::exists(base.string() + ".json"); ++n)
          base = std::filesystem::path(args->report_dir) / fmt::format("{}-{}", safe_stem, n);
        write_file(base.string() + ".json", render_validate_json(in).dump(2) + "\n");
        write_file(base.string() + ".md", render_validate_markdown(in));
        written = base.string() + ".json";
      }
      if (timeline_out) {
        timeline_out->write(render_timeline_csv(result));
        timeline_out->commit();
      }

      if (args->json) fmt::print("{}\n", render_validate_json(in).dump(2));
      else {
        fmt::print("{}", render_validate_text(in));
        if (!written.empty()) fmt::print("Report: {} (and .md)\n", written);
      }
      std::fflush(stdout);
      return passed ? 0 : 1;
    };
  });
}

}  // namespace trainplan::cli
