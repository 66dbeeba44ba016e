#pragma once
// The fit check's output: a report for people, and one JSON object for scripts.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "planner/evaluate/plan.hpp"
#include "planner/search/suggest.hpp"

namespace trainplan::cli {

struct plan_report_input {
  const plan_result& plan;
  const std::vector<fit_suggestion>& suggestions;
  const std::vector<std::string>& notes;     // how the shape and defaults were chosen
  std::optional<double> train_tokens;        // --tokens
  // When no suggestion keeps the numerics on this hardware: the lowest peak that such a change reaches.
  std::optional<std::uint64_t> same_numerics_floor_bytes = std::nullopt;
  // How the suggestions were asked for (--suggestions, --keep): none asked for, or every lever kept, is not
  // "nothing fits".
  std::size_t suggestions_requested = 8;
  bool levers_kept = false;
};

std::vector<std::string> plan_assumptions(const plan_result& plan);
std::string render_plan_text(const plan_report_input& in);
nlohmann::json render_plan_json(const plan_report_input& in);

}  // namespace trainplan::cli
