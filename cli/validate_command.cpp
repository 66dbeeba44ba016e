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

#include "cli/commands.hpp"
#include "cli/format.hpp"
#include "cli/model_run_options.hpp"
#include "cli/validate_report.hpp"
#include "planner/flops.hpp"
#include "planner/input_error.hpp"
#include "planner/inventory.hpp"
#include "planner/param_count.hpp"
#include "planner/quantity_parse.hpp"
#include "planner/timeline.hpp"
#include "validate/validation.hpp"

namespace trainplan::cli {
namespace {

struct validate_args {
  model_run_args model_run;
  std::string backend = "cpu";
  std::string steps = "2", seed = "1234";
  double tolerance_pct = 0.5;
  bool json = false, no_report = false, force = false;
  std::string report_dir = "reports", timeline_csv;
};

// The CPU backend runs every FLOP with scalar reference kernels (about a GFLOP/s): beyond these it
// would run for many minutes or exhaust memory, which is rarely what someone who typed a 7B model wants.
constexpr double cpu_flops_limit = 2e11;
constexpr std::uint64_t cpu_bytes_limit = 8ull << 30;

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary);
  if (!out || !(out << text) || !out.flush())
    throw input_error(fmt::format("cannot write {}", path.string()));
}

std::string timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

}  // namespace

void register_validate_command(CLI::App& app, command_action& chosen) {
  auto args = std::make_shared<validate_args>();
  CLI::App* cmd = app.add_subcommand(
      "validate", "run real training steps and compare measured memory with the prediction (exit 0 pass, 1 fail)");
  add_model_run_options(*cmd, args->model_run);
  cmd->add_option("--backend", args->backend, "cpu (the CUDA backend arrives with issue 4)")->type_name("NAME");
  cmd->add_option("--steps", args->steps, "optimizer steps to run (default 2: step 2 is the steady state)")->type_name("N");
  cmd->add_option("--seed", args->seed, "seed for weights, data and dropout (default 1234)")->type_name("N");
  cmd->add_option("--tolerance", args->tolerance_pct, "allowed |measured - predicted| peak, in percent (default 0.5)")
      ->type_name("PCT")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_flag("--json", args->json, "print the report as one JSON object");
  cmd->add_option("--report-dir", args->report_dir, "folder for the JSON and Markdown reports (default reports)")
      ->type_name("DIR");
  cmd->add_flag("--no-report", args->no_report, "write no report files");
  cmd->add_option("--timeline-csv", args->timeline_csv, "write live bytes per event (predicted, measured) as CSV")
      ->type_name("FILE");
  cmd->add_flag("--force", args->force, "run even when the CPU backend would take very long");

  cmd->callback([args, &chosen]() {
    chosen = [args]() -> int {
      resolved_run r = resolve_model_run(args->model_run);
      if (args->backend == "cuda")
        throw input_error("--backend cuda: this build has no CUDA backend yet (issue 4); use --backend cpu");
      if (args->backend != "cpu") throw input_error(fmt::format("--backend: unknown backend '{}' (known: cpu)", args->backend));
      validate::training_options options;
      options.steps = static_cast<int>(std::min<std::uint64_t>(parse_integer(args->steps, "--steps"), 1000));
      options.seed = parse_integer(args->seed, "--seed", 0);
      validate::check_harness_supports(r.model, r.run);

      const precision_layout layout = make_precision_layout(r.run.precision, r.run.grad_dtype);
      const std::uint64_t predicted_peak = walk_timeline(build_inventory(r.model, r.run, layout), r.run.grad_accum, timeline_detail::peak).peak.live_bytes;
      const double flops = count_flops(r.model, r.run, count_params(r.model)).hardware_per_step * options.steps;
      if (!args->force && (flops > cpu_flops_limit || predicted_peak > cpu_bytes_limit))
        throw input_error(fmt::format(
            "the CPU backend would run {:.2g} FLOPs over {} of buffers; use a small shape (e.g. --layers 2 --hidden 64 "
            "--heads 4 --vocab 256 --seq 64) or pass --force",
            flops, gib(predicted_peak)));

      const validate::validation_result result = validate::validate_on_cpu(r.model, r.run, options);
      const bool passed = result.passed(args->tolerance_pct);
      const validate_report_input in{r.model, r.run, result, args->tolerance_pct, passed};

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
      if (!args->timeline_csv.empty()) write_file(args->timeline_csv, render_timeline_csv(result));

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
