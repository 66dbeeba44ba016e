// `plan sweep`: every combination of the listed values, one row each, as CSV or JSON lines.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "cli/commands.hpp"
#include "cli/output_file.hpp"
#include "cli/sweep_output.hpp"
#include "cli/model_run_options.hpp"
#include "cli/number_option.hpp"
#include "cli/sweep_space_options.hpp"
#include "planner/util/input_error.hpp"
#include "planner/evaluate/plan.hpp"

namespace trainplan::cli {
namespace {

struct sweep_args {
  model_run_args model_run;
  std::string format = "csv", output;
  unsigned threads = 0;
  bool quiet = false;
  bool estimate = false;  // --estimate: no allocator replay
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
  cmd->add_option("--threads", args->threads, "worker threads, 1 to 1024 (default: every core)")
      ->type_name("N")->check(whole_number("--threads", 1, 1024));
  cmd->add_flag("--quiet", args->quiet, "no progress bar");
  cmd->add_flag("--estimate", args->estimate,
                fmt::format("--framework {}: keep the peak estimate (tensors + context + workspaces + the calibrated "
                            "slack) instead of replaying PyTorch's caching allocator for every row, as plan does: a "
                            "thousand times faster or more, for millions of rows; peak and verdict may then differ from "
                            "plan's",
                            profiles_where([](const stack_profile& p) {
                              return p.allocator == allocator_model::pytorch_replay;
                            })));
  cmd->footer(
      "Example: plan sweep --model llama-3.1-8b,mistral-7b --seq 512:32k:x2 --micro-batch 1,2,4,8 "
      "--recompute none,selective,full --gpu h100,a100-80gb -o sweep.csv");

  cmd->callback([args, &chosen]() {
    chosen = [args]() -> int {
      sweep_format format;
      if (args->format == "csv") format = sweep_format::csv;
      else if (args->format == "jsonl") format = sweep_format::jsonl;
      else throw input_error(fmt::format("--format: unknown format '{}' (known: csv, jsonl)", args->format));
      std::vector<std::string> notes;
      const sweep_space space = resolve_sweep_space(args->model_run, &notes);
      if (!args->quiet)
        for (const std::string& note : notes) fmt::print(stderr, "plan sweep: note: {}\n", note);
      // Each axis is capped at 2^20 values, but their product is not: 10^12 rows would run for weeks. A
      // hundred million rows take a few minutes on two cores and tens of GB of CSV.
      constexpr std::uint64_t max_rows = 100'000'000;
      if (space.size() > max_rows)
        throw input_error(fmt::format("the sweep has {} configurations, more than the {} plan sweep writes: narrow an axis",
                                      space.size(), max_rows));

      if (!args->estimate && !args->quiet && replays_allocator(space.base) && space.size() > 20'000)
        fmt::print(stderr, "plan sweep: note: {} configurations: the allocator replay takes up to a few milliseconds "
                           "of a core a row, most for rows that do not fit (it finds the least memory they need), less where "
                           "several GPUs share a row's replay; --estimate is a thousand times faster\n", space.size());
      // One output path (cli/output_file.hpp): a regular file is replaced only once the whole sweep is
      // written; a device or FIFO (/dev/null, /dev/stdout) is written directly and never replaced.
      output_file out(args->output.empty() ? "-" : args->output);
      const sweep_stats stats = run_sweep(space, format, out.stream(), args->threads, !args->quiet, !args->estimate,
                                          args->output.empty() || args->output == "-" ? "standard output" : args->output);
      out.commit();
      if (!out.is_stdout())
        fmt::print(stderr, "{} configurations ({} fit, {} invalid) written to {} in {:.2f} s\n", stats.rows,
                   stats.fitting, stats.invalid, args->output, stats.seconds);
      return 0;
    };
  });
}

}  // namespace trainplan::cli
