#include "planner/plan.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "planner/checked_math.hpp"
#include "planner/input_error.hpp"

namespace trainplan {
namespace {

void validate_run(const model_spec& m, const run_config& run) {
  if (run.seq == 0 || run.micro_batch == 0 || run.grad_accum == 0)
    throw input_error("sequence length, micro-batch and accumulation must each be at least 1");
  if (m.max_positions > 0 && run.seq > m.max_positions)
    throw input_error(fmt::format("--seq {} is longer than model {}'s {} learned positions", run.seq, m.name,
                                  m.max_positions));
  if (run.dropout < 0.0 || run.dropout >= 1.0) throw input_error("--dropout must be at least 0 and below 1");
  // Tokens per step must be countable exactly.
  checked_product({run.seq, run.micro_batch, run.grad_accum}, "tokens per step");
}

// Bytes the optimizer step reads and writes: the gradient once; the master copy (or the weights when
// there is none) read and written; the 16-bit weights written from the master; each state read and written.
std::uint64_t optimizer_traffic_bytes(const inventory& inv, const precision_layout& layout, std::uint64_t params) {
  const char* what = "optimizer traffic";
  std::uint64_t bytes = checked_mul(params, dtype_bytes(layout.optimizer_grad_dtype()), what);
  if (layout.master) {
    bytes = checked_add(bytes, checked_mul(params, 2 * dtype_bytes(*layout.master), what), what);
    bytes = checked_add(bytes, checked_mul(params, dtype_bytes(layout.weights), what), what);
  } else {
    bytes = checked_add(bytes, checked_mul(params, 2 * dtype_bytes(layout.weights), what), what);
  }
  for (const tensor_spec& t : inv.tensors)
    if (t.category == tensor_category::optimizer) bytes = checked_add(bytes, checked_mul(t.bytes, 2, what), what);
  return bytes;
}

}  // namespace

plan_result evaluate_plan(const model_spec& model, const run_config& run, const gpu_spec& gpu,
                          const calibration& calib, const plan_options& options) {
  validate_model(model);
  validate_run(model, run);
  plan_result r;
  r.model = model;
  r.run = run;
  r.gpu = gpu;
  r.calib = calib;
  r.layout = make_precision_layout(run.precision, run.grad_dtype);
  model_facts local;
  const model_facts* facts = options.facts;
  if (!facts) {
    local = describe_model(model);
    facts = &local;
  }
  r.params = facts->counts;

  auto peak = gpu.peak_flops_per_s(r.layout.compute);
  if (!peak)
    throw input_error(fmt::format("GPU {} has no {} tensor throughput in gpus.json; precision {} cannot run on it",
                                  gpu.name, dtype_name(r.layout.compute), precision_name(run.precision)));

  r.inv = build_inventory(model, run, r.layout, facts);
  r.timeline = walk_timeline(r.inv, run.grad_accum, options.detail);
  r.tensor_peak_bytes = r.timeline.peak.live_bytes;

  r.overhead.cuda_context_bytes = calib.cuda_context_bytes;
  r.overhead.cublas_workspace_bytes = calib.cublas_workspace_bytes;
  const double slack = std::floor(static_cast<double>(r.tensor_peak_bytes) * calib.allocator_slack_fraction);
  if (slack >= static_cast<double>(std::numeric_limits<std::uint64_t>::max()))
    throw input_error("allocator slack is larger than 64 bits can hold");
  r.overhead.allocator_slack_bytes = static_cast<std::uint64_t>(slack);
  r.peak_bytes = checked_add(r.tensor_peak_bytes,
                             checked_add(r.overhead.cuda_context_bytes,
                                         checked_add(r.overhead.cublas_workspace_bytes, r.overhead.allocator_slack_bytes,
                                                     "overhead"),
                                         "overhead"),
                             "peak bytes");
  r.fits = r.peak_bytes <= gpu.memory_bytes;
  // Both sides are below 2^64; the difference of two such values can exceed int64, so saturate.
  if (r.fits) {
    std::uint64_t room = gpu.memory_bytes - r.peak_bytes;
    r.headroom_bytes = room > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
                           ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(room);
  } else {
    std::uint64_t short_by = r.peak_bytes - gpu.memory_bytes;
    r.headroom_bytes = short_by > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
                           ? std::numeric_limits<std::int64_t>::min() : -static_cast<std::int64_t>(short_by);
  }

  r.flops = count_flops(model, run, r.params);
  r.time = estimate_step_time(r.flops, *peak, gpu, calib, optimizer_traffic_bytes(r.inv, r.layout, r.params.total),
                              static_cast<double>(run.seq) * static_cast<double>(run.micro_batch));
  return r;
}

}  // namespace trainplan
