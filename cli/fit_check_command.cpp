// `plan` itself, the fit check: its options, the check and its suggestions (planner/search/fit_check.hpp), the
// report in text or JSON, and --emit's configuration files. Exit 0 when the run fits, 1 when not.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "planner/profiles/registry.hpp"
#include "cli/output_file.hpp"
#include "cli/commands.hpp"
#include "cli/emit_config.hpp"
#include "cli/model_run_options.hpp"
#include "cli/plan_report.hpp"
#include "planner/util/input_error.hpp"
#include "planner/util/quantity_parse.hpp"
#include "planner/search/fit_check.hpp"

namespace trainplan::cli {

namespace {

struct fit_check_args {
  model_run_args model_run;
  std::string tokens, emit, output;
  bool json = false;
  std::size_t max_suggestions = 8;
  std::string keep;
  bool allow_shorter_seq = false;
};

}  // namespace

command_action register_fit_check(CLI::App& app) {
  auto args = std::make_shared<fit_check_args>();
  add_model_run_options(app, args->model_run);
  app.add_option("--tokens", args->tokens, "training tokens (e.g. 1T): prints the time to train")->type_name("COUNT")->group("Run");
  app.add_flag("--json", args->json, "print one JSON object instead of the report");
  app.add_option("--emit", args->emit, fmt::format("write a config for {} (with -o FILE)", emit_engine_names()))
      ->type_name("ENGINE");
  app.add_option("-o,--output", args->output, "the file --emit writes")->type_name("FILE");
  app.add_option("--suggestions", args->max_suggestions, "at most this many ways to fit when it does not (default 8)")
      ->type_name("N")->check(CLI::Range(0, 50));
  app.add_option("--keep", args->keep,
                 "levers the suggestions must not touch: precision, optimizer, optimizer-impl, recompute, batch, "
                 "attention, adapters, gpus, offload, seq, ep, allocator (comma-separated)")
      ->type_name("LIST");
  app.add_flag("--allow-shorter-seq", args->allow_shorter_seq,
               "the suggestions may also shorten the sequence (the longest that fits, a multiple of 256)");

  return [args]() -> int {
    resolved_run r = resolve_model_run(args->model_run);
    std::optional<double> tokens;
    if (!args->tokens.empty()) tokens = static_cast<double>(parse_decimal_count(args->tokens, "--tokens"));
    fit_check check = check_fit(r.model, r.run, r.gpu, r.calib, tokens);
    if (!args->emit.empty() || !args->output.empty()) {
      if (args->emit.empty()) throw input_error("-o is for --emit: say which engine");
      const emitted_config emitted = emit_config(args->emit, args->output, r.model, r.run);
      std::vector<std::pair<std::string, std::string>> files;
      for (const emitted_file& f : emitted.files) files.emplace_back(f.path, f.content);
      write_outputs(files);  // all or none
      for (const emitted_file& f : emitted.files) fmt::print(stderr, "wrote {} ({} config)\n", f.path, args->emit);
      for (const std::string& note : emitted.notes) fmt::print(stderr, "note: {}\n", note);
      // No engine's config file holds the allocator's setting: it is the training process's environment.
      if (r.run.expandable_segments && profile_of(r.run).offers_expandable_segments)
        fmt::print(stderr, "the prediction assumes PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: set it in the "
                           "training job's environment\n");
    }
    // Adapters are offered to a fine-tuning run (--finetune given), never to pretraining.
    const suggest_options suggest{args->max_suggestions, args->keep.empty() ? 0u : parse_levers(args->keep, "--keep"),
                                  args->allow_shorter_seq, !args->model_run.finetune.empty()};
    add_suggestions(check, r.model, r.run, r.gpu, r.calib, suggest);
    plan_report_input in{check, r.notes};
    in.suggestions_requested = args->max_suggestions;
    in.levers_kept = suggest.kept_levers != 0;
    if (args->json) fmt::print("{}\n", render_plan_json(in).dump(2));
    else fmt::print("{}", render_plan_text(in));
    std::fflush(stdout);
    return check.plan.fits ? 0 : 1;
  };
}

}  // namespace trainplan::cli
