// `plan sweep`: every combination of the listed values, one row each, as CSV or JSON lines.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <unistd.h>

#include "cli/commands.hpp"
#include "cli/sweep_output.hpp"
#include "cli/sweep_space_options.hpp"
#include "planner/input_error.hpp"

namespace trainplan::cli {
namespace {

struct sweep_args {
  model_run_args model_run;
  std::string format = "csv", output;
  unsigned threads = 0;
  bool quiet = false;
};

}  // namespace

void register_sweep_command(CLI::App& app, command_action& chosen) {
  auto args = std::make_shared<sweep_args>();
  CLI::App* cmd = app.add_subcommand(
      "sweep",
      "evaluate the cross product of option values (lists a,b,c and ranges START:STOP[:+N|xN]) into CSV or JSON lines");
  add_model_run_options(*cmd, args->model_run);
  cmd->add_option("--format", args->format, "csv (default) or jsonl")->type_name("FORMAT");
  cmd->add_option("-o,--output", args->output, "file to write (default: standard output)")->type_name("FILE");
  cmd->add_option("--threads", args->threads, "worker threads (default: every core)")->type_name("N");
  cmd->add_flag("--quiet", args->quiet, "no progress bar");
  cmd->footer(
      "Example: plan sweep --model llama-3.1-8b,mistral-7b --seq 512:32k:x2 --micro-batch 1,2,4,8 "
      "--recompute none,selective,full --gpu h100,a100-80gb -o sweep.csv");

  cmd->callback([args, &chosen]() {
    chosen = [args]() -> int {
      sweep_format format;
      if (args->format == "csv") format = sweep_format::csv;
      else if (args->format == "jsonl") format = sweep_format::jsonl;
      else throw input_error(fmt::format("--format: unknown format '{}' (known: csv, jsonl)", args->format));
      const sweep_space space = resolve_sweep_space(args->model_run);

      // Write to a temporary file beside the target and rename at the end: a failed sweep never leaves a
      // truncated file where a previous good one was.
      std::FILE* out = stdout;
      std::string temp;
      if (!args->output.empty()) {
        temp = args->output + ".partial";
        out = std::fopen(temp.c_str(), "wb");
        if (!out) throw input_error(fmt::format("-o: cannot write {}", args->output));
      }
      const bool progress = !args->quiet && isatty(fileno(stderr)) && space.size() > 20000;
      sweep_stats stats;
      try {
        stats = run_sweep(space, format, out, args->threads, progress);
      } catch (...) {
        if (out != stdout) std::fclose(out), std::remove(temp.c_str());
        throw;
      }
      if (out != stdout) {
        if (std::fclose(out) != 0) {
          std::remove(temp.c_str());
          throw input_error(fmt::format("-o: writing {} failed", args->output));
        }
        std::error_code ec;
        std::filesystem::rename(temp, args->output, ec);
        if (ec) throw input_error(fmt::format("-o: cannot move the result to {}: {}", args->output, ec.message()));
        fmt::print(stderr, "{} configurations ({} fit, {} invalid) written to {} in {:.2f} s\n", stats.rows,
                   stats.fitting, stats.invalid, args->output, stats.seconds);
      }
      return 0;
    };
  });
}

}  // namespace trainplan::cli
