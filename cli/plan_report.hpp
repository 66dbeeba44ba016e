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

struct plan_report_input {
  const fit_check& check;
  const std::vector<std::string>& notes;     // how the shape and defaults were chosen
  // How the suggestions were asked for (--suggestions, --keep): none asked for, or every lever kept, is not
  // "nothing fits".
  std::size_t suggestions_requested = 8;
  bool levers_kept = false;
};

std::vector<std::string> plan_assumptions(const plan_result& plan);
std::string render_plan_text(const plan_report_input& in);
nlohmann::json render_plan_json(const plan_report_input& in);

}  // namespace trainplan::cli
