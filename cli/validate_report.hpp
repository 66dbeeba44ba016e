#pragma once
// Output of `plan validate`: the report for people, one JSON object, a Markdown summary, a timeline CSV.
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "planner/model/model_spec.hpp"
#include "planner/run/run_config.hpp"
#include "validate/validation.hpp"

namespace trainplan::cli {

struct validate_report_input {
  const model_spec& model;
  const run_config& run;
  const validate::validation_result& result;
  double tolerance_pct;
  bool passed;
  std::string gpu;  // the planner's GPU name (--gpu), recorded for plan calibrate
};

std::string render_validate_text(const validate_report_input& in);
nlohmann::json render_validate_json(const validate_report_input& in);
std::string render_validate_markdown(const validate_report_input& in);
std::string render_timeline_csv(const validate::validation_result& result);

}  // namespace trainplan::cli
