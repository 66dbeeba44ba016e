#pragma once
// The fit check's output: a report for people, and one JSON object for scripts. Both render what the fit
// check computed (planner/search/fit_check.hpp), nothing more.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "planner/evaluate/plan.hpp"
#include "planner/search/fit_check.hpp"

namespace trainplan::cli {

// One option as the command line gave it: its long name ("--seq") and its value (none for a flag).
struct given_option {
  std::string name;
  std::optional<std::string> value;
};

struct plan_report_input {
  const fit_check& check;
  const std::vector<std::string>& notes;     // how the shape and defaults were chosen
  // How the suggestions were asked for (--suggestions, --keep): none asked for, or every lever kept, is not
  // "nothing fits".
  std::size_t suggestions_requested = 8;
  bool levers_kept = false;
  // The options of the command line, in its order: each suggestion prints as this command with its changes
  // merged in (suggested_command). Empty: a suggestion prints its changes alone.
  std::vector<given_option> command{};
  bool explain = false;  // --explain: the assumptions in full, not their summary
};

// The text report's widest line, in columns: longer lines wrap.
inline constexpr std::size_t report_width = 100;

// The command a suggestion stands for: `plan`, then the options given, each that the suggestion changes (its
// `changes`, as planner/search/levers.hpp writes them: "--micro-batch 1 --grad-accum 8") taking the new value
// in its place, the ones it implies dropped (--global-batch beside --grad-accum, --fsdp beside --zero, --nodes
// beside --gpus), and the options the command did not give after them. Words, unquoted.
std::vector<std::string> suggested_command(const std::vector<given_option>& given, const std::vector<std::string>& changes);
// The words as one line a POSIX shell reads back as them (single quotes where a word needs them).
std::string shell_line(const std::vector<std::string>& words);

// The assumptions of plan_assumptions in a few short lines, for the report (--explain prints the full ones).
std::vector<std::string> plan_assumptions_summary(const plan_result& plan);

std::vector<std::string> plan_assumptions(const plan_result& plan);
std::string render_plan_text(const plan_report_input& in);
nlohmann::json render_plan_json(const plan_report_input& in);

}  // namespace trainplan::cli
