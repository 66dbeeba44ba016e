// A sweep space visited by index (sweep.hpp): its size, the point at a mixed-radix index, and one point
// evaluated, reusing its neighbour's inventory where only the accumulation changed.
#include "planner/search/sweep.hpp"

#include "planner/profiles/registry.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "planner/util/checked_math.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {
namespace {

// Peels the innermost digit of a mixed-radix index.
std::size_t take(std::uint64_t& index, std::size_t radix) {
  const std::size_t digit = static_cast<std::size_t>(index % radix);
  index /= radix;
  return digit;
}

}  // namespace

std::array<std::uint64_t, sweep_space::digit_count> sweep_space::radices() const {
  auto or_one = [](std::size_t n) -> std::uint64_t { return n == 0 ? 1 : n; };
  return {global_batches.empty() ? grad_accums.size() : global_batches.size(), micro_batches.size(), seqs.size(),
          or_one(dropouts.size()), attentions.size(), recomputes.size(), or_one(optimizer_impls.size()),
          or_one(expandable_segments.size()), or_one(finetunes.size()), or_one(offloads.size()), or_one(layouts.size()),
          optimizers.size(), grad_dtypes.size(), precisions.size(), gpus.size(), models.size()};
}

std::uint64_t sweep_space::size() const {
  std::uint64_t n = 1;
  for (const std::uint64_t radix : radices()) n = checked_mul(n, radix, "the number of sweep configurations");
  return n;
}

sweep_space::point sweep_space::at(std::uint64_t index) const {
  point p;
  p.run = base;
  run_config& r = p.run;
  const std::size_t accum_i = take(index, global_batches.empty() ? grad_accums.size() : global_batches.size());
  r.micro_batch = micro_batches[take(index, micro_batches.size())];
  r.seq = seqs[take(index, seqs.size())];
  const std::size_t drop_i = dropouts.empty() ? 0 : take(index, dropouts.size());
  r.attention = attentions[take(index, attentions.size())];
  r.recompute = recomputes[take(index, recomputes.size())];
  if (!optimizer_impls.empty()) r.optimizer_impl = optimizer_impls[take(index, optimizer_impls.size())];
  if (!expandable_segments.empty()) r.expandable_segments = expandable_segments[take(index, expandable_segments.size())];
  if (!finetunes.empty()) r.finetune = finetunes[take(index, finetunes.size())];
  if (!offloads.empty()) r.offload = offloads[take(index, offloads.size())];
  if (!layouts.empty()) {
    const gpu_layout& layout = layouts[take(index, layouts.size())];
    r.gpus = layout.gpus;
    r.zero = layout.zero;
    r.ep = layout.ep;
  }
  r.optimizer = optimizers[take(index, optimizers.size())];
  r.grad_dtype = grad_dtypes[take(index, grad_dtypes.size())];
  r.precision = precisions[take(index, precisions.size())];
  p.gpu = &gpus[take(index, gpus.size())];
  p.model = &models[take(index, models.size())];
  // The model's dropout unless swept; llm.c has none, so its profile takes 0 (as `plan` does: cli/model_run_options.cpp).
  r.dropout = !dropouts.empty() ? dropouts[drop_i] : !profile_of(r).runs_model_dropout ? 0.0 : p.model->spec.dropout;
  if (global_batches.empty()) {
    r.grad_accum = grad_accums[accum_i];
  } else {
    const std::uint64_t global = global_batches[accum_i];
    const std::uint64_t per_step = r.micro_batch * std::max<std::uint64_t>(1, r.data_parallel());  // across replicas
    if (global % per_step != 0) {
      p.error = fmt::format("global batch {} is not a multiple of micro-batch {} x {} data-parallel GPUs", global,
                            r.micro_batch, r.data_parallel());
      r.grad_accum = 0;
    } else {
      r.grad_accum = global / per_step;
    }
  }
  return p;
}

sweep_result evaluate_point(const sweep_space::point& p, plan_reuse* reuse, bool replay) {
  sweep_result out;
  out.point = p;
  if (!p.error.empty()) {
    out.error = p.error;
    return out;
  }
  try {
    plan_options options;
    options.detail = timeline_detail::peak;
    options.facts = &p.model->facts;
    options.copy_specs = false;  // the space holds the model and the GPU
    options.reuse = reuse;
    out.plan.emplace(evaluate_plan(p.model->spec, p.run, p.gpu->spec, p.gpu->calib, options));
    // As plan's fit check: the replay's verdict, and its peak (for a row that does not fit, the least memory in
    // which the replay completes), so that a row's peak is plan's and a column of them can be plotted.
    if (replay) apply_allocator_replay(*out.plan, p.model->facts, p.gpu->spec.memory_bytes, reuse);
  } catch (const input_error& e) {
    out.error = e.what();
  }
  return out;
}

}  // namespace trainplan
