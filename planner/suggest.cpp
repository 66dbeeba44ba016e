#include "planner/suggest.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "planner/input_error.hpp"
#include "planner/search.hpp"
#include "planner/sweep_axis.hpp"

namespace trainplan {
namespace {

struct change {
  std::string flag;
  std::function<void(run_config&)> apply;
  bool changes_training = false;
  bool slower = false;
};

using axis = std::vector<change>;

std::vector<axis> change_axes(const run_config& run, const gpu_spec& gpu, unsigned kept) {
  std::vector<axis> axes;

  axis recompute;
  if (run.recompute == recompute_mode::none)
    recompute.push_back({"--recompute selective", [](run_config& r) { r.recompute = recompute_mode::selective; }});
  if (run.recompute != recompute_mode::full)
    recompute.push_back({"--recompute full", [](run_config& r) { r.recompute = recompute_mode::full; }});
  if (!(kept & keep_recompute)) axes.push_back(std::move(recompute));

  if (run.attention == attention_kind::eager && !(kept & keep_attention))
    axes.push_back({{"--attention flash", [](run_config& r) { r.attention = attention_kind::flash; }}});

  axis batch;  // every smaller divisor of the micro-batch, accumulation scaled to keep the global batch
  for (std::uint64_t mb = run.micro_batch / 2; mb >= 1; --mb) {
    if (run.micro_batch % mb != 0) continue;
    const std::uint64_t accum = run.grad_accum * (run.micro_batch / mb);
    batch.push_back({fmt::format("--micro-batch {} --grad-accum {}", mb, accum), [mb, accum](run_config& r) {
                       r.micro_batch = mb;
                       r.grad_accum = accum;
                     }});
    if (batch.size() >= 6) break;  // 1, 2, 4... beyond six halvings the list only repeats the lesson
  }
  if (!(kept & keep_batch)) axes.push_back(std::move(batch));

  axis precision;
  if (run.grad_dtype == grad_dtype_choice::fp32)
    precision.push_back({"--grad-dtype auto", [](run_config& r) { r.grad_dtype = grad_dtype_choice::automatic; }, true});
  if ((run.precision == precision_regime::fp32 || run.precision == precision_regime::amp_bf16 ||
       run.precision == precision_regime::megatron_bf16) && gpu.peak_flops_per_s(dtype::bf16))
    precision.push_back({"--precision bf16-mixed", [](run_config& r) {
                           r.precision = precision_regime::bf16_mixed;
                           r.grad_dtype = grad_dtype_choice::automatic;
                         }, true});
  if (run.precision == precision_regime::fp32 && !gpu.peak_flops_per_s(dtype::bf16))
    precision.push_back({"--precision fp16-mixed", [](run_config& r) {
                           r.precision = precision_regime::fp16_mixed;
                           r.grad_dtype = grad_dtype_choice::automatic;
                         }, true});
  // Pure bf16 (model.to(bfloat16), bf16 optimizer state): what most people try first when 7B does not fit.
  if (run.precision != precision_regime::bf16 && gpu.peak_flops_per_s(dtype::bf16))
    precision.push_back({"--precision bf16", [](run_config& r) {
                           r.precision = precision_regime::bf16;
                           r.grad_dtype = grad_dtype_choice::automatic;
                         }, true});
  if (run.precision != precision_regime::fp8_mixed && run.framework != framework_kind::hf &&
      gpu.peak_flops_per_s(dtype::fp8))
    precision.push_back({"--precision fp8-mixed", [](run_config& r) {
                           r.precision = precision_regime::fp8_mixed;
                           r.grad_dtype = grad_dtype_choice::automatic;
                         }, true});
  if (!(kept & keep_precision)) axes.push_back(std::move(precision));

  axis optimizer;
  for (optimizer_kind o : {optimizer_kind::adamw_8bit, optimizer_kind::adafactor, optimizer_kind::lion}) {
    if (run.optimizer == o || run.optimizer == optimizer_kind::sgd) continue;
    optimizer.push_back({fmt::format("--optimizer {}", optimizer_name(o)), [o](run_config& r) { r.optimizer = o; }, true});
  }
  if (!(kept & keep_optimizer)) axes.push_back(std::move(optimizer));

  axis beyond;  // beyond the GPU's own memory: offload the optimizer, or train adapters instead
  if (run.offload == offload_mode::none && !(kept & keep_offload))
    beyond.push_back({"--offload optimizer", [](run_config& r) { r.offload = offload_mode::optimizer; }, false, true});
  if (run.finetune == finetune_kind::full && !(kept & keep_adapters)) {
    beyond.push_back({"--finetune lora", [](run_config& r) { r.finetune = finetune_kind::lora; }, true});
    beyond.push_back({"--finetune qlora", [](run_config& r) { r.finetune = finetune_kind::qlora; }, true});
  }
  axes.push_back(std::move(beyond));

  std::erase_if(axes, [](const axis& a) { return a.empty(); });
  return axes;
}

// The rank of a suggestion's costs: what keeps the numerics and the hardware first (at full speed, then
// slower), then what changes the numerics, then what needs more GPUs.
int cost_rank(unsigned costs) {
  if (costs & cost_hardware) return 3;
  if (costs & cost_numerics) return 2;
  if (costs & cost_slower) return 1;
  return 0;
}

}  // namespace

std::string suggestion_cost_text(unsigned costs) {
  std::string out;
  auto add = [&](const char* s) { out += (out.empty() ? "" : ", ") + std::string(s); };
  if (costs == cost_none) add("same numerics");
  if (costs & cost_numerics) add("changes the numerics");
  if (costs & cost_hardware) add("more hardware");
  if (costs & cost_slower) add("slower");
  return out;
}

unsigned parse_kept_levers(std::string_view list) {
  unsigned kept = 0;
  for (const std::string& name : parse_name_axis(list, "--keep")) {
    if (name == "precision") kept |= keep_precision;
    else if (name == "optimizer") kept |= keep_optimizer;
    else if (name == "recompute") kept |= keep_recompute;
    else if (name == "batch") kept |= keep_batch;
    else if (name == "attention") kept |= keep_attention;
    else if (name == "adapters") kept |= keep_adapters;
    else if (name == "gpus") kept |= keep_gpus;
    else if (name == "offload") kept |= keep_offload;
    else
      throw input_error(fmt::format("--keep: unknown lever '{}' (known: precision, optimizer, recompute, batch, "
                                    "attention, adapters, gpus, offload)", name));
  }
  return kept;
}

std::vector<fit_suggestion> suggest_fits(const model_spec& model, const run_config& run, const gpu_spec& gpu,
                                         const calibration& calib, std::size_t max_results, unsigned kept) {
  const std::vector<axis> axes = change_axes(run, gpu, kept);
  std::vector<fit_suggestion> found;
  // Candidates are evaluated like the search's (planner/search.hpp), against the verdict's budget: the
  // whole GPU memory (no safety margin, as the fit check itself).
  const sweep_model sm{model, describe_model(model)};
  const sweep_gpu sg{gpu, calib};

  // Depth-first over axes: each axis contributes nothing or one of its changes; at most three changes.
  std::vector<const change*> picked;
  std::function<void(std::size_t)> explore = [&](std::size_t next_axis) {
    if (!picked.empty()) {
      run_config candidate = run;
      fit_suggestion s;
      for (const change* c : picked) {
        c->apply(candidate);
        s.changes.push_back(c->flag);
        if (c->changes_training) s.costs |= cost_numerics;
        if (c->slower) s.costs |= cost_slower;
      }
      // A combination this GPU cannot run (nullopt) is simply not a suggestion.
      const std::optional<config_summary> r = summarize_config(sm, sg, candidate, 0.0);
      if (r && r->fits) {
        s.run = candidate;
        s.peak_bytes = r->peak_bytes;
        s.headroom_bytes = static_cast<std::int64_t>(r->budget_bytes - r->peak_bytes);
        s.tokens_per_second = r->tokens_per_second;
        found.push_back(std::move(s));
      }
    }
    if (picked.size() == 3) return;
    for (std::size_t a = next_axis; a < axes.size(); ++a)
      for (const change& c : axes[a]) {
        picked.push_back(&c);
        explore(a + 1);
        picked.pop_back();
      }
  };
  explore(0);

  // More GPUs of the same kind: for each ZeRO stage, the fewest (a power of two up to 1024) that fit with
  // everything else unchanged ("the minimum number of GPUs of a kind for a run").
  if (run.gpus == 1 && !(kept & keep_gpus)) {
    for (int stage : {3, 2, 1}) {
      for (std::uint64_t n = 2; n <= 1024; n *= 2) {
        run_config candidate = run;
        candidate.gpus = n;
        candidate.zero = stage;
        const std::optional<config_summary> r = summarize_config(sm, sg, candidate, 0.0);
        if (!r) break;
        if (!r->fits) continue;
        fit_suggestion s;
        s.changes = {fmt::format("--gpus {} --zero {}", n, stage)};
        s.run = candidate;
        s.peak_bytes = r->peak_bytes;
        s.headroom_bytes = static_cast<std::int64_t>(r->budget_bytes - r->peak_bytes);
        s.tokens_per_second = r->tokens_per_second;
        s.gpus = n;
        s.costs = cost_hardware;
        found.push_back(std::move(s));
        break;
      }
    }
  }

  std::stable_sort(found.begin(), found.end(), [](const fit_suggestion& x, const fit_suggestion& y) {
    if (cost_rank(x.costs) != cost_rank(y.costs)) return cost_rank(x.costs) < cost_rank(y.costs);
    if (x.changes.size() != y.changes.size()) return x.changes.size() < y.changes.size();
    if (x.gpus != y.gpus) return x.gpus < y.gpus;  // fewer GPUs first: the cheapest way first
    return x.tokens_per_second > y.tokens_per_second;
  });
  // A combination that contains a smaller fitting combination adds nothing: drop it.
  std::vector<fit_suggestion> out;
  for (fit_suggestion& s : found) {
    bool redundant = std::any_of(out.begin(), out.end(), [&](const fit_suggestion& kept) {
      return std::all_of(kept.changes.begin(), kept.changes.end(), [&](const std::string& c) {
        return std::find(s.changes.begin(), s.changes.end(), c) != s.changes.end();
      });
    });
    if (!redundant) out.push_back(std::move(s));
    if (out.size() == max_results) break;
  }
  return out;
}

std::optional<std::uint64_t> same_numerics_floor(const model_spec& model, const run_config& run, const gpu_spec& gpu,
                                                 const calibration& calib) {
  run_config frugal = run;
  frugal.recompute = recompute_mode::full;
  frugal.attention = attention_kind::flash;
  frugal.grad_accum = run.grad_accum * run.micro_batch;
  frugal.micro_batch = 1;
  const std::optional<config_summary> r =
      summarize_config(sweep_model{model, describe_model(model)}, sweep_gpu{gpu, calib}, frugal, 0.0);
  if (!r) return std::nullopt;
  return r->peak_bytes;
}

}  // namespace trainplan
