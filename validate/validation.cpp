// Validation against the planner (validation.hpp): runs the harness, then compares its peak and phase,
// every buffer's size by name, the components at the peak and every event's live bytes with the prediction.
#include "validate/validation.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>

#include "planner/profiles/registry.hpp"
#include "planner/memory/timeline.hpp"

namespace trainplan::validate {
namespace {

std::optional<event_kind> kind_from_name(const std::string& k) {
  static const std::map<std::string, event_kind> kinds = {
      {"fwd_embed", event_kind::fwd_embed}, {"fwd_layer", event_kind::fwd_layer}, {"fwd_head", event_kind::fwd_head},
      {"loss", event_kind::loss},           {"bwd_head", event_kind::bwd_head},   {"bwd_layer", event_kind::bwd_layer},
      {"bwd_embed", event_kind::bwd_embed}, {"optimizer", event_kind::optimizer}};
  auto it = kinds.find(k);
  if (it == kinds.end()) return std::nullopt;
  return it->second;
}

}  // namespace

bool validation_result::tensors_match() const {
  return std::all_of(tensors.begin(), tensors.end(), [](const tensor_comparison& t) { return t.matches(); });
}

bool validation_result::passed(double tolerance_pct) const {
  return std::abs(delta_pct) <= tolerance_pct && tensors_match();
}

validation_result compare_with_planner(const training_run& run) {
  validation_result r;
  const inventory inv = build_inventory(run.model, run.config, run.layout);
  const timeline_result predicted = walk_timeline(inv, run.config.grad_accum, timeline_detail::every_event);
  const tracking_allocator& alloc = run.alloc;
  r.steps = static_cast<int>(run.records.size());
  r.steps_run = run.records;

  // Peak.
  r.predicted_peak_bytes = predicted.peak.live_bytes;
  r.measured_peak_bytes = alloc.peak_bytes();
  r.predicted_peak_phase = describe_point(predicted.peak, run.config.grad_accum);
  r.measured_peak_phase = alloc.peak_phase().label;
  r.delta_pct = r.predicted_peak_bytes == 0 ? 0.0
                                            : 100.0 * (static_cast<double>(r.measured_peak_bytes) -
                                                       static_cast<double>(r.predicted_peak_bytes)) /
                                                  static_cast<double>(r.predicted_peak_bytes);

  // Buffers by name.
  std::map<std::string, tensor_category> category_of;
  for (const tensor_spec& t : inv.tensors) {
    const std::string name(t.name);
    category_of[name] = t.category;
    tensor_comparison c{name, t.bytes, 0, true, false};
    auto it = alloc.bytes_by_template().find(name);
    if (it != alloc.bytes_by_template().end()) c.measured = true, c.measured_bytes = it->second;
    r.tensors.push_back(c);
  }
  for (const auto& [name, bytes] : alloc.bytes_by_template())
    if (!category_of.count(name)) r.tensors.push_back({name, 0, bytes, false, true});

  // Components at the peaks.
  std::map<std::string, component_comparison> components;
  for (int c = 0; c < tensor_category_count; ++c) {
    const std::string name(category_name(static_cast<tensor_category>(c)));
    components[name] = {name, predicted.category_bytes_at_peak[c], 0};
  }
  for (const live_buffer& b : alloc.live_at_peak()) {
    auto it = category_of.find(name_template(b.name));
    const std::string name = it == category_of.end() ? "unpredicted" : std::string(category_name(it->second));
    components[name].component = name;
    components[name].measured_bytes += b.bytes;
  }
  for (auto& [name, c] : components) r.components.push_back(c);

  // Timeline: every event the harness ran against the planner's (later steps and micro-batches repeat
  // step 2 and micro-batch 2). The planner's step 1 is the run's steps up to its first applied update (fp16
  // may skip some: their updates create no state, and are marked), step 2 every one after it.
  const int first_applied = run.first_applied_step();
  for (const phase_record& p : alloc.phases()) {
    auto kind = kind_from_name(p.kind);
    if (!kind) continue;
    const int step = first_applied > 0 && p.step > first_applied ? 2 : 1;
    const std::uint64_t mb = std::min<std::uint64_t>(p.micro_batch, 1);
    const bool skipped_update = *kind == event_kind::optimizer && (first_applied == 0 || p.step < first_applied);
    timeline_row row{skipped_update ? p.label + " (update skipped: fp16 overflow)" : p.label, 0, p.max_live_bytes};
    for (const timeline_point& q : predicted.points)
      if (q.step == step && q.micro_batch == mb && q.kind == *kind && q.layer == p.layer) row.predicted_bytes = q.live_bytes;
    r.timeline.push_back(row);
  }
  return r;
}

validation_result validate_on(const kernels::kernel_ops& ops, const model_spec& m, const run_config& run,
                              const training_options& options, const device_measurements* device) {
  check_harness_supports(m, run);
  std::optional<device_measurements> measured;
  if (device) {
    measured = *device;
    // Before any buffer exists: the context and cuBLAS's handle, less its workspace (reported on its own).
    const std::uint64_t used = ops.device_used_bytes();
    measured->context_bytes = used > measured->workspace_bytes ? used - measured->workspace_bytes : 0;
  }
  training_run harness(m, run, options, ops);
  const auto start = std::chrono::steady_clock::now();
  double steady_seconds = 0;
  const int steps = options.steps;
  int timed = 0;
  auto more = [&](int k) {
    if (k < steps || (!harness.reached_steady_state() && k < steps + training_run::max_extra_steps)) return true;
    return device != nullptr && steady_seconds < device_timing_min_seconds && timed < device_timing_max_steps;
  };
  for (int k = 0; more(k); ++k) {
    ops.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    harness.step();
    ops.synchronize();
    if (k > 0 || steps == 1) {
      steady_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++timed;
    }
  }
  const auto stop = std::chrono::steady_clock::now();
  validation_result r = compare_with_planner(harness);
  r.backend = ops.backend;
  r.seconds = std::chrono::duration<double>(stop - start).count();
  if (measured) {
    measured->device_peak_bytes = harness.alloc.device_peak_bytes();
    measured->step_seconds = steady_seconds / std::max(1, timed);
    r.device = measured;
  }
  return r;
}

}  // namespace trainplan::validate
