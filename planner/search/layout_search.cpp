// The layout search (layout_search.hpp).
#include "planner/search/layout_search.hpp"

#include <algorithm>
#include <optional>
#include <numeric>

#include "planner/model/model_facts.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/run/pipeline.hpp"
#include "planner/search/search.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {

std::string_view step_share_name(step_share s) {
  switch (s) {
    case step_share::compute: return "compute";
    case step_share::pipeline_bubble: return "pipeline bubble";
    case step_share::optimizer: return "optimizer";
    case step_share::offload: return "offload";
    case step_share::communication: return "communication";
  }
  return "?";
}

namespace {

std::vector<std::uint64_t> powers_of_two_dividing(std::uint64_t n, std::uint64_t limit) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t p = 1; p <= limit; p *= 2)
    if (n % p == 0) out.push_back(p);
  return out;
}

layout_row row_of(const plan_result& p, std::uint64_t budget) {
  layout_row row;
  row.run = p.run;
  row.peak_bytes = p.peak_bytes;
  row.budget_bytes = budget;
  row.fits = p.peak_bytes <= budget && p.host_fits && !(p.allocator && p.allocator->out_of_memory);
  row.tokens_per_second = p.time.tokens_per_second;
  row.mfu = p.time.mfu;
  row.step_seconds = p.time.step_seconds;
  const comm_time& c = p.time.communication;
  row.communication_seconds = c.seconds;
  row.exposed_communication_seconds = c.exposed_seconds + c.slowdown_seconds;
  row.exposed_by_group = c.exposed_by_group;
  // The step's parts: compute less the pipeline's idle share, the bubble, the optimizer, offload, communication.
  const double bubble_fraction = pipeline_bubble_fraction(p.run.pp, p.run.vpp, p.run.grad_accum);
  const double bubble = p.time.compute_seconds * bubble_fraction / (1 + bubble_fraction);
  const std::array<std::pair<step_share, double>, 5> parts{{{step_share::compute, p.time.compute_seconds - bubble},
                                                            {step_share::pipeline_bubble, bubble},
                                                            {step_share::optimizer, p.time.optimizer_seconds},
                                                            {step_share::offload, p.time.offload_seconds},
                                                            {step_share::communication, row.exposed_communication_seconds}}};
  row.dominant = std::max_element(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.second < b.second; })->first;
  std::size_t g = 0;
  for (std::size_t i = 1; i < comm_group_count; ++i)
    if (c.exposed_by_group[i] > c.exposed_by_group[g]) g = i;
  row.dominant_group = static_cast<comm_group>(g);
  return row;
}

}  // namespace

layout_search_result search_layouts(const model_spec& model, const run_config& base, const gpu_spec& gpu,
                                    const calibration& calib, const layout_search_options& options) {
  if (base.gpus < 1) throw input_error("--gpus must be at least 1");
  if (options.target_tokens_per_step == 0) throw input_error("the target batch must be at least one token");
  if (!(options.margin >= 0 && options.margin < 1)) throw input_error("--margin must be a fraction in [0, 1)");
  const model_facts facts = describe_model(model);
  const std::uint64_t node = gpu.cluster ? std::max<std::uint64_t>(gpu.cluster->gpus_per_node, 1) : 8;
  const std::uint64_t budget = memory_budget(gpu, options.margin), whole_gpu = memory_budget(gpu, 0.0);

  // The candidates, in a fixed order: stack, tp, pp, ep, zero, recompute, micro-batch.
  std::vector<run_config> candidates;
  const std::uint64_t heads_gcd = model.kv_heads > 0 ? std::gcd(model.heads, model.kv_heads) : model.heads;
  for (const stack_profile* stack : options.stacks)
    for (std::uint64_t tp : powers_of_two_dividing(heads_gcd, std::min(node, base.gpus)))
      for (std::uint64_t pp = 1; pp <= model.layers && tp * pp <= base.gpus; ++pp) {
        // The run's context parallelism (--cp) is kept: the search varies the other degrees around it.
        if (model.layers % pp != 0 || base.gpus % (tp * pp * base.cp) != 0) continue;
        const std::uint64_t dp = base.gpus / (tp * pp * base.cp);
        const std::vector<std::uint64_t> eps = model.is_moe() ? powers_of_two_dividing(std::gcd(model.experts, dp), dp)
                                                              : std::vector<std::uint64_t>{1};
        for (std::uint64_t ep : eps)
          for (int zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero)
            for (recompute_mode rc : {recompute_mode::none, recompute_mode::selective, recompute_mode::full}) {
              if (rc == recompute_mode::selective && !stack->offers_selective_recompute) continue;
              for (std::uint64_t mb = 1; mb <= options.max_micro_batch; mb *= 2) {
                run_config r = base;
                r.profile = stack;
                r.precision = base.profile == stack ? base.precision : stack->default_precision(false);
                r.tp = tp, r.pp = pp, r.ep = ep, r.zero = zero, r.recompute = rc, r.micro_batch = mb;
                r.vpp = 1;
                // Sequence parallelism with tensor parallelism, as Megatron-LM recommends it: the same collectives'
                // volume, a tp-th of the norms' and dropouts' activations (a stack without tensor parallelism
                // refuses tp > 1 whatever this says).
                r.sequence_parallel = tp > 1;
                candidates.push_back(r);
              }
            }
      }

  layout_search_result out;
  plan_options po;
  po.detail = timeline_detail::peak;
  po.facts = &facts;
  po.copy_specs = false;
  const std::uint64_t total = candidates.size();
  std::uint64_t done = 0;
  // Failing rows whose replay was left out (their floor alone passes the budget): (index in out.failing, floor).
  std::vector<std::pair<std::size_t, std::uint64_t>> unreplayed;
  for (run_config& r : candidates) {
    if (options.progress) options.progress(done, total);
    ++done;
    const std::uint64_t per_micro_batch = r.seq * r.micro_batch * r.data_parallel();
    if (per_micro_batch == 0 || options.target_tokens_per_step % per_micro_batch != 0) {
      ++out.unreachable;
      continue;
    }
    r.grad_accum = options.target_tokens_per_step / per_micro_batch;
    ++out.evaluated;
    try {
      plan_result p = evaluate_plan(model, r, gpu, calib, po);
      // As the search's summaries: the allocator replay where the tensors fit, the verdict on the whole GPU's replay.
      const std::uint64_t floor = p.tensor_peak_bytes + p.overhead.fixed_bytes();
      if (floor <= budget) confirm_with_allocator_replay(p, facts, whole_gpu);
      else if (replays_allocator(r)) unreplayed.push_back({out.failing.size(), floor});
      layout_row row = row_of(p, budget);
      (row.fits ? out.fitting : out.failing).push_back(row);
    } catch (const input_error& e) {
      if (out.invalid++ == 0) out.first_invalid_reason = e.what();
    }
  }
  if (options.progress) options.progress(total, total);
  // The failing row shown (the least peak, the first of equals) with its peak as plan gives it: the rows that
  // could be it replayed, in the order of their floor (a lower bound of the replay's peak: it reserves at
  // least the tensor peak), until the floor passes the least peak known; the others keep their floor.
  {
    std::vector<bool> left(out.failing.size(), false);
    for (const std::pair<std::size_t, std::uint64_t>& u : unreplayed) left[u.first] = true;
    std::optional<std::uint64_t> best;
    for (std::size_t k = 0; k < out.failing.size(); ++k)
      if (!left[k] && (!best || out.failing[k].peak_bytes < *best)) best = out.failing[k].peak_bytes;
    std::stable_sort(unreplayed.begin(), unreplayed.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    for (const auto& [at, floor] : unreplayed) {
      if (best && floor > *best) break;
      plan_result p = evaluate_plan(model, out.failing[at].run, gpu, calib, po);  // evaluated once already
      apply_allocator_replay(p, facts, whole_gpu);
      out.failing[at] = row_of(p, budget);
      left[at] = false;
      if (!best || out.failing[at].peak_bytes < *best) best = out.failing[at].peak_bytes;
    }
    for (const std::pair<std::size_t, std::uint64_t>& u : unreplayed)
      if (left[u.first]) out.failing[u.first].peak_bytes = u.second;
  }
  std::stable_sort(out.fitting.begin(), out.fitting.end(), [](const layout_row& a, const layout_row& b) {
    if (a.tokens_per_second != b.tokens_per_second) return a.tokens_per_second > b.tokens_per_second;
    return a.peak_bytes < b.peak_bytes;
  });
  // Recomputation that costs nothing here (selective under flash attention, which recomputes the attention core
  // anyway) ties with none to the last digit: one row of the two, the one that recomputes less.
  const auto same_but_recompute = [](const layout_row& a, const layout_row& b) {
    run_config x = a.run, y = b.run;
    x.recompute = y.recompute;
    return x == y && a.peak_bytes == b.peak_bytes && a.tokens_per_second == b.tokens_per_second;
  };
  out.fitting.erase(std::unique(out.fitting.begin(), out.fitting.end(), same_but_recompute), out.fitting.end());
  std::stable_sort(out.failing.begin(), out.failing.end(),
                   [](const layout_row& a, const layout_row& b) { return a.peak_bytes < b.peak_bytes; });
  return out;
}

}  // namespace trainplan
