// `plan` itself, the fit check: its options, the check and its suggestions (planner/search/fit_check.hpp), the
// report in text or JSON, and --emit's configuration files. Exit 0 when the run fits, 1 when not.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "planner/profiles/registry.hpp"
#include "cli/number_option.hpp"
#include "cli/output_file.hpp"
#include "cli/commands.hpp"
#include "cli/emit_config.hpp"
#include "cli/format.hpp"
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
  bool explain = false, force = false;
};

// The options the command line gave, in its order, each once with the value it took (the last, where an option
// takes its last value): what a suggestion's command is made of (plan_report.hpp, suggested_command).
std::vector<given_option> given_options(const CLI::App& app) {
  std::vector<given_option> out;
  std::vector<const CLI::Option*> seen;
  for (const CLI::Option* o : app.parse_order()) {
    if (std::find(seen.begin(), seen.end(), o) != seen.end()) continue;
    seen.push_back(o);
    const std::vector<std::string>& names = o->get_lnames();
    const std::string name = !names.empty() ? "--" + names.front()
                             : !o->get_snames().empty() ? "-" + o->get_snames().front()
                                                        : o->get_name();
    const std::vector<std::string>& values = o->results();
    if (o->get_expected_max() == 0) {  // a flag: given, unless given as false
      const std::string last = values.empty() ? std::string() : values.back();
      if (last != "false" && last != "0" && last != "-1") out.push_back({name, std::nullopt});
    } else if (o->get_items_expected_max() > 1) {  // several values at once (none of plan's options today)
      for (const std::string& v : values) out.push_back({name, v});
    } else {
      out.push_back({name, values.empty() ? std::optional<std::string>() : values.back()});
    }
  }
  return out;
}

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
      ->type_name("N")->check(whole_number("--suggestions", 0, 50));
  app.add_option("--keep", args->keep,
                 "levers the suggestions must not touch: precision, optimizer, optimizer-impl, recompute, batch, "
                 "attention, adapters, gpus, offload, seq, ep, allocator (comma-separated)")
      ->type_name("LIST");
  app.add_flag("--allow-shorter-seq", args->allow_shorter_seq,
               "the suggestions may also shorten the sequence (the longest that fits, a multiple of 256)");
  app.add_flag("--explain", args->explain, "the report's assumptions in full, not their summary");
  app.add_flag("--force", args->force, "with --emit: write the config even when the plan does not fit");

  return [args, &app]() -> int {
    resolved_run r = resolve_model_run(args->model_run);
    std::optional<double> tokens;
    if (!args->tokens.empty()) tokens = static_cast<double>(parse_decimal_count(args->tokens, "--tokens"));
    fit_check check = check_fit(r.model, r.run, r.gpu, r.calib, tokens);
    if (args->force && args->emit.empty()) throw input_error("--force is for --emit: say which engine");
    if (!args->emit.empty() || !args->output.empty()) {
      if (args->emit.empty()) throw input_error("-o is for --emit: say which engine");
      // What the engine cannot express is refused first; then a plan that does not fit, unless forced.
      const emitted_config emitted = emit_config(args->emit, args->output, r.model, r.run);
      const plan_result& p = check.plan;
      const std::string short_by =
          p.headroom_bytes < 0 ? fmt::format("peak {} on a {} GPU", gib(p.peak_bytes), gib(p.gpu.memory_bytes))
          : !p.host_fits       ? fmt::format("the host needs {} of CPU memory and has {}", gib(p.host_bytes), gib(r.run.host_memory_bytes))
                               : std::string("PyTorch's caching allocator runs out of memory");
      if (!p.fits && !args->force)
        throw input_error(fmt::format("--emit {}: the plan does not fit ({}): run without --emit for what would make it fit, "
                                      "or add --force to write it anyway", args->emit, short_by));
      std::vector<std::pair<std::string, std::string>> files;
      for (const emitted_file& f : emitted.files) files.emplace_back(f.path, f.content);
      write_outputs(files);  // all or none
      if (!p.fits) fmt::print(stderr, "warning: --force: the config is for a plan that does not fit ({})\n", short_by);
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
    in.command = given_options(app);
    in.explain = args->explain;
    if (args->json) fmt::print("{}\n", render_plan_json(in).dump(2));
    else fmt::print("{}", render_plan_text(in));
    std::fflush(stdout);
    return check.plan.fits ? 0 : 1;
  };
}

}  // namespace trainplan::cli
