// plan: will this training run fit on this GPU, how fast will it go, and what would make it fit?
// Exit codes: 0 fits (or a command succeeded), 1 does not fit, 2 bad input, 3 internal error.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <filesystem>
#include <system_error>
#include <exception>

#include "cli/commands.hpp"
#include "cli/output_file.hpp"
#include "planner/util/input_error.hpp"
#include "planner/util/names.hpp"

namespace {

constexpr int exit_bad_input = 2;
constexpr int exit_internal = 3;

// An option given with an empty value (--seq "") is a mistake, not "not given": refuse it for every option
// of the command that runs.
void reject_empty_values(CLI::App& app) {
  for (const CLI::Option* opt : app.get_options())
    if (opt->count() > 0)
      for (const std::string& value : opt->results())
        if (value.empty()) throw trainplan::input_error(fmt::format("{}: the value is empty", opt->get_name()));
  for (CLI::App* sub : app.get_subcommands()) reject_empty_values(*sub);
}

// The message as one printable line: control characters a user typed (a newline in a model name or a path)
// are escaped, and a message echoing a huge input is cut, at a UTF-8 character boundary.
std::string one_printable_line(std::string_view message) {
  constexpr std::size_t max_bytes = 1000;
  std::string line;
  for (const char c : message) {
    if (line.size() >= max_bytes) {
      while (!line.empty() && (static_cast<unsigned char>(line.back()) & 0xC0) == 0x80) line.pop_back();
      if (!line.empty() && static_cast<unsigned char>(line.back()) >= 0xC0) line.pop_back();  // a lead byte cut off
      line += "...";
      break;
    }
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '\n') line += "\\n";
    else if (c == '\t') line += "\\t";
    else if (u < 0x20 || u == 0x7F) line += fmt::format("\\x{:02x}", u);
    else line += c;
  }
  return line;
}

// Prints "plan: <kind>: <message>" on stderr and never throws: a closed or full stderr must not turn an
// error into an abort (std::terminate from a throwing print in a catch block).
void report(std::string_view kind, std::string_view message) noexcept {
  try {
    const std::string text = fmt::format("plan: {}: {}\n", kind, one_printable_line(message));
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
  } catch (...) {
  }
}

// An option the command does not have, named with the one meant: a close spelling of one of its options, or
// the option other tools call by that name (--dtype, --batch-size...). Empty when no argument is an unknown option.
std::string unknown_option_message(const CLI::App& app, int argc, char** argv) {
  // The command the arguments were for: the subcommand given, else the fit check.
  const CLI::App* command = &app;
  for (const CLI::App* sub : app.get_subcommands()) command = sub;
  std::vector<std::string> names;
  for (const CLI::Option* o : command->get_options())
    for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
  static const std::pair<std::string_view, std::string_view> synonyms[] = {
      {"--dtype", "--precision"},         {"--mixed-precision", "--precision"}, {"--batch-size", "--micro-batch"},
      {"--bs", "--micro-batch"},          {"--seq-len", "--seq"},               {"--seqlen", "--seq"},
      {"--max-seq-len", "--seq"},         {"--sequence-length", "--seq"},       {"--num-gpus", "--gpus"},
      {"--ngpus", "--gpus"},              {"--world-size", "--gpus"},           {"--tensor-parallel", "--tp"},
      {"--pipeline-parallel", "--pp"},    {"--gradient-accumulation-steps", "--grad-accum"},
      {"--gradient-checkpointing", "--recompute full"}, {"--lora", "--finetune lora"}, {"--qlora", "--finetune qlora"}};
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (!arg.starts_with("--")) continue;
    arg = arg.substr(0, arg.find('='));
    if (std::find(names.begin(), names.end(), arg) != names.end()) continue;
    for (const auto& [other, ours] : synonyms)
      if (trainplan::same_name(arg, other)) return fmt::format("unknown option {}; did you mean {}?", arg, ours);
    std::vector<std::string_view> views(names.begin(), names.end());
    const std::string_view close = trainplan::closest_name(arg, views);
    return close.empty() ? fmt::format("unknown option {}", arg)
                         : fmt::format("unknown option {}; did you mean {}?", arg, close);
  }
  return {};
}

// `plan --gpu l4 max micro-batch` parses --gpu as the fit check's option, which the subcommand never reads:
// it answered for the default H100 and exited 0. Options belong after the subcommand's name.
void refuse_options_before_subcommand(const CLI::App& app) {
  const std::vector<CLI::App*> chosen = app.get_subcommands();
  if (chosen.empty()) return;
  std::string given;
  for (const CLI::Option* o : app.get_options())
    if (o->count() > 0) given += (given.empty() ? "" : ", ") + o->get_name();
  if (!given.empty())
    throw trainplan::input_error(fmt::format("{} given before the subcommand '{}': put {} after it (plan {} --help lists "
                                             "its options)", given, chosen.front()->get_name(),
                                             given.find(',') == std::string::npos ? "it" : "them", chosen.front()->get_name()));
}

// "activation bytes is larger than 64 bits can hold" comes from deep in the planner, which knows no options: the
// sizes given on the command line (the options whose values are numbers) are named after it, as the ones to
// make smaller. Other messages, and those naming an option already, are returned as they are.
std::string naming_sizes_given(const CLI::App& app, const std::string& message) {
  if (message.find("larger than 64 bits can hold") == std::string::npos || message.find("--") != std::string::npos)
    return message;
  const CLI::App* command = &app;
  for (const CLI::App* sub : app.get_subcommands()) command = sub;
  std::string sizes;
  for (const CLI::Option* o : command->get_options()) {
    if (o->count() == 0 || o->get_name().rfind("--", 0) != 0) continue;
    const std::vector<std::string>& values = o->results();
    if (values.empty() || !std::all_of(values.begin(), values.end(), [](const std::string& v) {
          return !v.empty() && std::isdigit(static_cast<unsigned char>(v.front()));
        }))
      continue;
    std::string joined;
    for (const std::string& v : values) joined += (joined.empty() ? "" : " ") + v;
    sizes += fmt::format("{}{} {}", sizes.empty() ? "" : ", ", o->get_name(), joined);
  }
  if (sizes.empty()) return message;
  return fmt::format("{} (from the sizes given: {}; make one of them smaller)", message, sizes);
}

// Whatever a command printed must reach its destination: a full disk is an error (exit 2), not a silent
// success. A reader that has gone (`plan ... | head -1`) took what it wanted: the command's own exit code, quietly.
int flushed(int code) {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    const int err = errno;
    if (trainplan::cli::reader_gone(stdout, err)) return code;
    report("error", fmt::format("writing standard output failed: {}", std::strerror(err)));
    return exit_bad_input;
  }
  return code;
}

int run(int argc, char** argv) {
  CLI::App app{
      "trainplan: predicts whether a transformer training run fits on a GPU, where every byte goes, the FLOPs and time "
      "of a step, and what to change when it does not fit.\n"
      "Example: plan --params 7B --seq 4096 --gpu h100\n"
      "Exit codes: 0 fits, 1 does not fit, 2 bad input.",
      "plan"};
  app.set_version_flag("--version", "trainplan 0.1.0");
  app.require_subcommand(0, 1);

  trainplan::cli::install_output_signal_handlers();
  try {
    trainplan::cli::command_action chosen;
    trainplan::cli::command_action fit_check = trainplan::cli::register_fit_check(app);
    trainplan::cli::register_list_commands(app, chosen);
    trainplan::cli::register_clusters_command(app, chosen);
    trainplan::cli::register_validate_command(app, chosen);
    trainplan::cli::register_sweep_command(app, chosen);
    trainplan::cli::register_bench_command(app, chosen);
    trainplan::cli::register_search_command(app, chosen);
    trainplan::cli::register_max_command(app, chosen);
    trainplan::cli::register_plot_command(app, chosen);
    trainplan::cli::register_calibrate_command(app, chosen);
    trainplan::cli::register_check_command(app, chosen);
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
      return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
      return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
      return app.exit(e);
    } catch (const CLI::ParseError& e) {
      if (dynamic_cast<const CLI::ExtrasError*>(&e))
        if (const std::string unknown = unknown_option_message(app, argc, argv); !unknown.empty()) {
          report("error", fmt::format("{} (see plan --help)", unknown));
          return exit_bad_input;
        }
      report("error", fmt::format("{} (see plan --help)", e.what()));
      return exit_bad_input;
    }
    reject_empty_values(app);
    refuse_options_before_subcommand(app);
    return flushed(chosen ? chosen() : fit_check());
  } catch (const trainplan::cli::output_closed&) {
    // The reader of the output has gone (`plan sweep ... | head -1`): it has what it wanted, as with `seq 1e9 |
    // head -1`. Nothing more is written to the pipe, nor a message to stderr.
    return 0;
  } catch (const trainplan::input_error& e) {
    std::fflush(stdout);
    report("error", naming_sizes_given(app, e.what()));
    return exit_bad_input;
  } catch (const std::filesystem::filesystem_error& e) {
    // A folder that cannot be read or made, a TMPDIR that cannot be written: the user's to fix.
    std::fflush(stdout);
    report("error", e.what());
    return exit_bad_input;
  } catch (const std::system_error& e) {
    // fmt reports a failed write (a full disk, a closed pipe) this way; a reader that has gone is no error.
    if (e.code().value() == EPIPE || trainplan::cli::reader_gone(stdout, 0)) return 0;
    report("error", fmt::format("writing failed: {}", e.what()));
    return exit_bad_input;
  } catch (const std::exception& e) {
    report("internal error", e.what());
    return exit_internal;
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (...) {  // whatever escaped (a print that threw while the help text was written): never an abort
    report("internal error", "unexpected failure");
    return exit_internal;
  }
}
