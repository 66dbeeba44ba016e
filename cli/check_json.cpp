// `plan check --json`: the comparison `plan check` prints, as one JSON object (docs/json.md, "plan check
// --json"): each file's runs with their configuration, what was measured, what was predicted and the errors.
// scripts/accuracy_page.py writes docs/accuracy.md's tables from it.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/measurement_check.hpp"
#include "planner/measure/measured_runs.hpp"
#include "planner/measure/measurement_check.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/profiles/profile.hpp"
#include "planner/run/optimizer.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"
#include "planner/util/text_file.hpp"

namespace trainplan::cli {
namespace {

using json = nlohmann::ordered_json;

// What the run trained, from its report line: enough to tell the committed runs apart.
json configuration_json(const measured_run& r) {
  const model_spec& m = r.model;
  const run_config& c = r.run;
  json j = {{"family", family_name(m.family)},
            {"layers", m.layers},
            {"hidden", m.hidden},
            {"vocab", m.vocab},
            {"params", r.params},
            {"seq", c.seq},
            {"micro_batch", c.micro_batch},
            {"grad_accum", c.grad_accum},
            {"precision", precision_name(c.precision)},
            {"attention", attn_implementation_name(c.attention)},
            {"loss", loss_name(c.loss)},
            {"recompute", recompute_name(c.recompute)},
            {"optimizer_impl", optimizer_impl_name(c.optimizer_impl)},
            {"dropout", c.dropout},
            {"expandable_segments", c.expandable_segments},
            {"sliding_window_tokens", m.sliding_window_tokens},
            {"finetune", finetune_name(c.finetune)}};
  if (c.finetune != finetune_kind::full) {
    j["lora_rank"] = c.lora_rank;
    j["lora_targets"] = lora_targets_text(c.lora_targets);
    j["lora_dropout"] = c.lora_dropout;
  }
  if (c.packing_doc_tokens > 0) j["packing_doc_tokens"] = c.packing_doc_tokens;
  if (compiles_layers(c)) {
    j["compile"] = true;
    j["compile_scope"] = compile_scope_name(c.compile);
  }
  if (r.layout) j["layout"] = {{"mode", r.layout->mode}, {"world_size", r.layout->world_size}, {"rank", r.layout->rank}};
  return j;
}

json measured_predicted(double measured, double predicted, double error_pct) {
  return {{"measured", measured}, {"predicted", predicted}, {"error_pct", error_pct}};
}

json measured_predicted_bytes(double measured, double predicted, double error_pct) {  // whole bytes
  return {{"measured", static_cast<std::uint64_t>(measured)}, {"predicted", static_cast<std::uint64_t>(predicted)},
          {"error_pct", error_pct}};
}

json run_json(const measured_file& f, const measured_run& r, const run_check& c) {
  const stack_profile* stack = r.stack ? r.stack : f.stack;
  json j = {{"id", r.id}, {"stack", stack ? std::string(stack->name) : std::string()}, {"configuration", configuration_json(r)}};
  if (!c.not_predicted.empty()) {
    j["status"] = "not_predicted";
    j["not_predicted_reason"] = c.not_predicted;
    return j;
  }
  const plan_result& p = c.plan;
  if (r.out_of_memory) {
    j["status"] = "out_of_memory";
    j["predicted_fits"] = p.fits;
  } else {
    j["status"] = r.memory_measured ? "measured" : "step_time_only";
    if (r.memory_measured) {
      j["tensor_peak_bytes"] = measured_predicted_bytes(c.measured_tensor_bytes, c.predicted_tensor_bytes, c.tensor_error_pct);
      j["device_peak_bytes"] = measured_predicted_bytes(c.measured_device_bytes, c.predicted_device_bytes, c.device_error_pct);
    }
    if (c.time_compared) j["step_seconds"] = measured_predicted(r.step_seconds, p.time.step_seconds, c.step_error_pct);
    if (r.gpu_profile && c.busy)
      j["gpu_busy_seconds"] = measured_predicted(r.gpu_profile->busy_seconds, c.busy->kernel_seconds, c.busy->busy_error_pct);
  }
  j["within"] = c.within;
  return j;
}

}  // namespace

int check_measurements_json(const std::vector<std::string>& files, const check_target_for& target_for,
                            double tensor_tolerance_pct, double device_tolerance_pct, double time_tolerance_pct,
                            bool one_process) {
  const check_tolerances tolerances{tensor_tolerance_pct, device_tolerance_pct, time_tolerance_pct};
  check_totals totals;
  json out = {{"schema_version", 1},
              {"tolerances_pct", {{"tensor_peak", tensor_tolerance_pct}, {"device_peak", device_tolerance_pct},
                                  {"step_time", time_tolerance_pct}}},
              {"files", json::array()}};
  for (const std::string& path : files) {
    measured_file f = parse_measurements(read_text_file(path), path);
    if (one_process) mark_one_process(f);
    const check_target target = target_for(f, path);
    const gpu_spec& gpu = *target.gpu;
    const calibration& calib = target.calib;
    json file = {{"path", path},
                 {"gpu", f.gpu},
                 {"predicted_as", gpu.name},
                 {"host_cpu", f.host_cpu},
                 {"torch", f.torch},
                 {"transformers", f.transformers},
                 {"context_bytes", f.context_bytes},
                 {"one_process", one_process},
                 {"runs", json::array()}};
    for (const measured_run& r : f.runs) {
      const run_check c = check_measured_run(f, r, gpu, calib, tolerances, false);
      totals.add(r, c);
      file["runs"].push_back(run_json(f, r, c));
    }
    out["files"].push_back(std::move(file));
  }
  out["largest_error_pct"] = {{"tensor_peak", totals.worst_tensor_pct},
                              {"device_peak", totals.worst_device_pct},
                              {"step_time", totals.worst_time_pct}};
  out["not_predicted"] = totals.not_predicted;
  out["all_within"] = totals.all_within;
  fmt::print("{}\n", out.dump(2));
  return totals.all_within ? 0 : 1;
}

}  // namespace trainplan::cli
