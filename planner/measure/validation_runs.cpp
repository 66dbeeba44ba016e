// The runs `plan validate` measures (validation_runs.hpp): the GPU suite, its long sequence and its largest
// micro-batches chosen by the planner's own verdicts, and the CPU backend's cost of a run.
#include "planner/measure/validation_runs.hpp"

#include <fmt/format.h>

#include "planner/memory/timeline.hpp"
#include "planner/model/model_facts.hpp"
#include "planner/model/param_count.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/run/precision.hpp"
#include "planner/search/max_fit.hpp"
#include "planner/search/search.hpp"
#include "planner/time/flops.hpp"

namespace trainplan {

std::vector<validation_case> gpu_validation_suite(const catalog& data, const gpu_spec& gpu, const calibration& calib) {
  std::vector<validation_case> cases;
  auto add = [&](std::string label, const char* model, run_config r, bool fit = true) {
    model_spec m = data.model(model).spec;
    cases.push_back({std::move(label), m, r, fit});
  };
  run_config base;
  base.seq = 1024;
  base.micro_batch = 2;
  for (const char* model : {"gpt2", "tinyllama-1.1b"})
    for (recompute_mode rc : {recompute_mode::none, recompute_mode::selective, recompute_mode::full})
      for (attention_kind att : {attention_kind::eager, attention_kind::flash}) {
        run_config r = base;
        r.recompute = rc;
        r.attention = att;
        r.dropout = std::string(model) == "gpt2" ? 0.1 : 0.0;
        add(fmt::format("{} {} {}", model, recompute_name(rc), attention_name(att)), model, r);
      }
  run_config r = base;
  r.micro_batch = 1, r.grad_accum = 4;
  add("gpt2 accumulation 4", "gpt2", r);
  r = base, r.micro_batch = 8;
  add("gpt2 micro-batch 8", "gpt2", r);
  r = base, r.precision = precision_regime::fp32;
  add("gpt2 fp32", "gpt2", r);
  r = base, r.precision = precision_regime::fp16_mixed;
  add("gpt2 fp16-mixed", "gpt2", r);
  r = base, r.grad_dtype = grad_dtype_choice::fp32;
  add("gpt2 fp32 gradient accumulation", "gpt2", r);
  // A second fp32 run and a second accumulating one, of the other family: `plan calibrate --held-out` on the
  // 2026-11-27 suite showed GPT-2 fp32 and GPT-2's 4 micro-batches alone of their kind (held out, -37% and
  // +26%), nothing else pinning the fp32 GEMM efficiency and the per-micro-batch costs.
  r = base, r.precision = precision_regime::fp32, r.attention = attention_kind::flash;
  add("tinyllama fp32", "tinyllama-1.1b", r);
  r = base, r.micro_batch = 1, r.grad_accum = 4, r.attention = attention_kind::flash;
  add("tinyllama accumulation 4", "tinyllama-1.1b", r);
  // Sequence lengths: 2048, 4096 and a long one, 32,768 or the longest that fits tinyllama with flash attention
  // and full recomputation (with the search's safety margin) when that is shorter. Not the longest itself: on an
  // H100 that is about 305,000 tokens, minutes a step, and the suite would not end within a GPU session's
  // command (the memory boundary is the micro-batch cases' below).
  const sweep_model tiny{data.model("tinyllama-1.1b").spec, describe_model(data.model("tinyllama-1.1b").spec)};
  const sweep_gpu g{gpu, calib};
  run_config longest = base;
  longest.micro_batch = 1;
  longest.recompute = recompute_mode::full;
  constexpr std::uint64_t long_seq_cap = 32768;
  const std::optional<std::uint64_t> max_seq = largest_fitting(1024, long_seq_cap, [&](std::uint64_t v) {
    run_config c = longest;
    c.seq = v;
    const auto s = summarize_config(tiny, g, c, calib.safety_margin_fraction);
    return s && s->fits;
  });
  for (std::uint64_t seq : {std::uint64_t{2048}, std::uint64_t{4096}, max_seq.value_or(std::uint64_t{0})}) {
    if (seq == 0) continue;
    longest.seq = seq;
    add(fmt::format("tinyllama seq {}", seq), "tinyllama-1.1b", longest);
  }
  // At about 95% of the GPU, and past it.
  run_config fill = base;
  fill.attention = attention_kind::flash;
  const auto fits_budget = [&](std::uint64_t mb, double margin) {
    run_config c = fill;
    c.micro_batch = mb;
    const auto s = summarize_config(tiny, g, c, margin);
    return s && s->fits;
  };
  if (const auto mb95 = largest_fitting(1, 4096, [&](std::uint64_t mb) { return fits_budget(mb, 0.05); })) {
    fill.micro_batch = *mb95;
    add(fmt::format("tinyllama micro-batch {} (~95% of the GPU)", *mb95), "tinyllama-1.1b", fill);
    if (const auto mb100 = largest_fitting(1, 4096, [&](std::uint64_t mb) { return fits_budget(mb, 0.0); })) {
      fill.micro_batch = *mb100 + 1;
      add(fmt::format("tinyllama micro-batch {} (predicted not to fit)", *mb100 + 1), "tinyllama-1.1b", fill, false);
    }
  }
  return cases;
}

validation_cost validation_run_cost(const model_spec& model, const run_config& run, std::uint64_t steps) {
  const precision_layout layout = make_precision_layout(run.precision, run.grad_dtype);
  validation_cost c;
  c.tensor_peak_bytes = walk_timeline(build_inventory(model, run, layout), run.grad_accum, timeline_detail::peak).peak.live_bytes;
  c.hardware_flops = count_flops(model, run, count_params(model), profile_of(run).traits).hardware_per_step * steps;
  return c;
}

}  // namespace trainplan
