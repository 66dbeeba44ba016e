// The output of `plan validate` (validate_report.hpp): the report for people, one JSON object, a Markdown
// summary and the timeline as CSV, each from one validation result.
#include "cli/validate_report.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/format.hpp"

namespace trainplan::cli {
namespace {

std::string run_summary(const model_spec& m, const run_config& r) {
  // MoE: the experts, top-k and the capacity (dropless or the factor), after the shape.
  const std::string moe = !m.is_moe() ? std::string()
                          : fmt::format(" experts={} top-{} {}", m.experts, m.experts_per_token,
                                        r.capacity_factor > 0 ? fmt::format("capacity {:g}", r.capacity_factor) : std::string("dropless"));
  return fmt::format("{} ({} family, L={} h={} heads={} kv={} ffn={} vocab={}{}), seq {} x micro-batch {} x {} accumulation, "
                     "{}, {}, recompute {}, {} attention, dropout {}",
                     m.name, family_name(m.family), m.layers, m.hidden, m.heads, m.kv_heads, m.ffn, m.vocab, moe, r.seq,
                     r.micro_batch, r.grad_accum, precision_name(r.precision), optimizer_name(r.optimizer),
                     recompute_name(r.recompute), attention_name(r.attention), r.dropout);
}

double delta_pct(std::uint64_t predicted, std::uint64_t measured) {
  if (predicted == 0) return measured == 0 ? 0.0 : 100.0;
  return 100.0 * (static_cast<double>(measured) - static_cast<double>(predicted)) / static_cast<double>(predicted);
}

std::size_t mismatches(const validate::validation_result& r) {
  std::size_t n = 0;
  for (const auto& t : r.tensors) n += !t.matches();
  return n;
}

}  // namespace

std::string render_validate_text(const validate_report_input& in) {
  const validate::validation_result& r = in.result;
  std::string out;
  auto line = [&out]<typename... T>(fmt::format_string<T...> f, T&&... args) {
    out += fmt::format(f, std::forward<T>(args)...);
    out += '\n';
  };
  line("trainplan validate: {} backend, {} steps in {:.2f} s", r.backend, r.steps, r.seconds);
  line("  {}", run_summary(in.model, in.run));
  line("");
  line("Peak of tensor bytes: predicted {} at {}", grouped(r.predicted_peak_bytes), r.predicted_peak_phase);
  line("                      measured  {} at {}", grouped(r.measured_peak_bytes), r.measured_peak_phase);
  line("                      delta {:+.3f}% (tolerance {:.2f}%)", r.delta_pct, in.tolerance_pct);
  line("");
  line("  {:<18} {:>16} {:>16} {:>9}", "component", "predicted", "measured", "delta");
  for (const auto& c : r.components) {
    if (c.predicted_bytes == 0 && c.measured_bytes == 0) continue;
    line("  {:<18} {:>16} {:>16} {:>8.2f}%", c.component, grouped(c.predicted_bytes), grouped(c.measured_bytes),
         delta_pct(c.predicted_bytes, c.measured_bytes));
  }
  line("");
  const std::size_t bad = mismatches(r);
  if (bad == 0) {
    line("Named buffers: all {} the planner lists were allocated by the harness with the predicted size.", r.tensors.size());
  } else {
    line("Named buffers that differ ({} of {}):", bad, r.tensors.size());
    line("  {:<36} {:>14} {:>14}", "name", "predicted", "measured");
    for (const auto& t : r.tensors)
      if (!t.matches())
        line("  {:<36} {:>14} {:>14}", t.name, t.predicted ? grouped(t.predicted_bytes) : "not predicted",
             t.measured ? grouped(t.measured_bytes) : "not allocated");
  }
  std::size_t timeline_off = 0;
  for (const auto& row : r.timeline) timeline_off += row.predicted_bytes != row.measured_bytes;
  line("Timeline: {} events, {} with live bytes other than predicted.", r.timeline.size(), timeline_off);
  std::string losses;
  for (const auto& s : r.steps_run)
    losses += fmt::format("{}step {} {:.4f}{}", losses.empty() ? "" : ", ", s.step, s.loss, s.skipped ? " (skipped)" : "");
  line("Losses: {}", losses);
  line("");
  if (r.device)
    line("Device ({}): {} in use at the peak, of which context {} and cuBLAS workspace {}; steady step {:.4f} s",
         r.device->name, gib(r.device->device_peak_bytes), gib(r.device->context_bytes), gib(r.device->workspace_bytes),
         r.device->step_seconds);
  line("Verdict: {}", in.passed ? fmt::format("PASS: the peak is within {:.2f}% and every buffer has its predicted size",
                                                 in.tolerance_pct)
                                   : "FAIL: see the differences above");
  line("");
  line("This run proves the inventory: the same buffers, sizes and lifetimes as the planner, in real training steps.");
  line("Only a GPU shows the CUDA context, the cuBLAS workspace, the device arena's gaps between buffers, and speed.");
  return out;
}

nlohmann::json render_validate_json(const validate_report_input& in) {
  using json = nlohmann::json;
  const validate::validation_result& r = in.result;
  const model_spec& m = in.model;
  const run_config& run = in.run;
  json tensors = json::array(), components = json::array(), steps = json::array();
  for (const auto& t : r.tensors)
    tensors.push_back({{"name", t.name},
                       {"predicted_bytes", t.predicted ? json(t.predicted_bytes) : json(nullptr)},
                       {"measured_bytes", t.measured ? json(t.measured_bytes) : json(nullptr)},
                       {"match", t.matches()}});
  for (const auto& c : r.components)
    components.push_back({{"component", c.component}, {"predicted_bytes", c.predicted_bytes}, {"measured_bytes", c.measured_bytes}});
  for (const auto& s : r.steps_run)
    steps.push_back({{"step", s.step}, {"loss", s.loss}, {"skipped", s.skipped}, {"loss_scale", s.loss_scale}});
  json timeline = json::array();
  for (const auto& row : r.timeline)
    timeline.push_back({{"phase", row.phase}, {"predicted_bytes", row.predicted_bytes}, {"measured_bytes", row.measured_bytes}});
  json out{{"backend", r.backend},
              {"model", {{"name", m.name}, {"family", family_name(m.family)}, {"layers", m.layers}, {"hidden", m.hidden},
                         {"heads", m.heads}, {"kv_heads", m.kv_heads}, {"head_dim", m.head_dim}, {"ffn", m.ffn},
                         {"vocab", m.vocab}, {"max_positions", m.max_positions}, {"tied_embeddings", m.tied_embeddings},
                         {"qkv_bias", m.qkv_bias}}},
              {"run", {{"seq", run.seq}, {"micro_batch", run.micro_batch}, {"grad_accum", run.grad_accum},
                       {"precision", precision_name(run.precision)}, {"grad_dtype", grad_dtype_choice_name(run.grad_dtype)},
                       {"optimizer", optimizer_name(run.optimizer)},
                       {"recompute", recompute_name(run.recompute)}, {"attention", attention_name(run.attention)},
                       {"dropout", run.dropout}}},
              {"steps_run", r.steps},
              {"seconds", r.seconds},
              {"predicted", {{"peak_bytes", r.predicted_peak_bytes}, {"peak_phase", r.predicted_peak_phase}}},
              {"measured", {{"peak_bytes", r.measured_peak_bytes}, {"peak_phase", r.measured_peak_phase}}},
              {"delta_pct", r.delta_pct},
              {"tolerance_pct", in.tolerance_pct},
              {"pass", in.passed},
              {"components", components},
              {"tensors", tensors},
              {"steps", steps},
              {"timeline", timeline},
              {"gpu", {{"name", in.gpu}}}};
  if (r.device) {
    out["device"] = {{"name", r.device->name},
                     {"context_bytes", r.device->context_bytes},
                     {"workspace_bytes", r.device->workspace_bytes},
                     {"device_peak_bytes", r.device->device_peak_bytes},
                     {"step_seconds", r.device->step_seconds}};
  }
  return out;
}

std::string render_validate_markdown(const validate_report_input& in) {
  const validate::validation_result& r = in.result;
  std::string md = fmt::format("# Validation on the {} backend: {}\n\n{}\n\n", r.backend, in.passed ? "PASS" : "FAIL",
                               run_summary(in.model, in.run));
  md += fmt::format("| | bytes | when |\n|---|---:|---|\n| predicted peak | {} | {} |\n| measured peak | {} | {} |\n\n",
                    grouped(r.predicted_peak_bytes), r.predicted_peak_phase, grouped(r.measured_peak_bytes),
                    r.measured_peak_phase);
  md += fmt::format("Delta {:+.3f}% (tolerance {:.2f}%).\n\n| component | predicted | measured |\n|---|---:|---:|\n",
                    r.delta_pct, in.tolerance_pct);
  for (const auto& c : r.components)
    if (c.predicted_bytes || c.measured_bytes)
      md += fmt::format("| {} | {} | {} |\n", c.component, grouped(c.predicted_bytes), grouped(c.measured_bytes));
  md += fmt::format("\n{} of {} named buffers have their predicted size.\n", r.tensors.size() - mismatches(r), r.tensors.size());
  return md;
}

std::string render_timeline_csv(const validate::validation_result& r) {
  std::string csv = "event,phase,predicted_bytes,measured_bytes\n";
  for (std::size_t i = 0; i < r.timeline.size(); ++i)
    csv += fmt::format("{},\"{}\",{},{}\n", i, r.timeline[i].phase, r.timeline[i].predicted_bytes, r.timeline[i].measured_bytes);
  return csv;
}

}  // namespace trainplan::cli
