// The fit check without the CLI (planner/search/fit_check.hpp): what the plan report shows, computed by the
// planner, against hand derivations.
#include <catch2/catch.hpp>

#include <cmath>

#include "planner/profiles/registry.hpp"
#include "planner/search/fit_check.hpp"
#include "planner/search/search.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using trainplan::test::data;

namespace {

fit_check check_on(const std::string& model, const std::string& gpu, const run_config& run,
                   std::optional<double> tokens = std::nullopt) {
  const gpu_spec& g = data().gpu(gpu);
  return check_fit(data().model(model).spec, run, g, data().calibration_for(g), tokens);
}

run_config gpt2_run(const char* profile = "trainplan") {
  run_config r;
  r.profile = &profile_named(profile);
  if (r.profile == &profile_named("hf")) r.precision = precision_regime::amp_bf16;  // hf has no bf16-mixed
  r.seq = 1024;
  r.micro_batch = 8;
  return r;
}

}  // namespace

TEST_CASE("time_to_train: the tokens at the plan's speed, and the optimizer steps rounded up", "[fit_check]") {
  // 1e9 tokens of s=1024 x micro-batch 8 = 8,192 tokens a step: 122,070.3 steps, so 122,071.
  fit_check c = check_on("gpt2", "h100", gpt2_run(), 1e9);
  REQUIRE(c.training);
  CHECK(c.training->tokens == 1e9);
  CHECK(c.training->steps == 122071);
  CHECK(c.training->seconds == Approx(1e9 / c.plan.time.tokens_per_second).epsilon(1e-12));
  // Two data-parallel GPUs take 16,384 tokens a step: 61,035.2 steps, so 61,036.
  run_config two = gpt2_run("hf");
  two.gpus = 2;
  two.zero = 1;
  c = check_on("gpt2", "h100", two, 1e9);
  REQUIRE(c.training);
  CHECK(c.training->steps == 61036);
  CHECK_FALSE(check_on("gpt2", "h100", gpt2_run()).training);
}

TEST_CASE("the allocator details: the loss's segment where PyTorch's default allocator was replayed", "[fit_check][allocator]") {
  // hf, GPT-2, s=1024, b=8: the loss's fp32 [b*s, V] buffer is 8 x 1,024 x 50,257 x 4 = 1,646,821,376 bytes; a
  // request above 10 MiB gets a segment rounded up to 2 MiB (PyTorch's kRoundLarge): 786 x 2 MiB = 1,648,361,472.
  const fit_check hf = check_on("gpt2", "h100", gpt2_run("hf"));
  REQUIRE(hf.plan.allocator);
  CHECK(hf.plan.loss_segment_bytes == 1'648'361'472ull);
  if (hf.plan.reserved_after_another_run_bytes) {
    const double now = static_cast<double>(hf.plan.allocator_reserved_bytes);
    const double then = static_cast<double>(*hf.plan.reserved_after_another_run_bytes);
    CHECK(hf.plan.allocator_edge == (std::abs(then - now) >= 0.01 * now));
  } else {
    CHECK_FALSE(hf.plan.allocator_edge);
  }
  // With expandable segments there are no segments of a size to name; the harness replays no allocator.
  run_config expandable = gpt2_run("hf");
  expandable.expandable_segments = true;
  CHECK_FALSE(check_on("gpt2", "h100", expandable).plan.loss_segment_bytes);
  const fit_check harness = check_on("gpt2", "h100", gpt2_run());
  CHECK_FALSE(harness.plan.allocator);
  CHECK_FALSE(harness.plan.loss_segment_bytes);
  CHECK_FALSE(harness.plan.reserved_after_another_run_bytes);
  CHECK_FALSE(harness.plan.allocator_edge);
}

TEST_CASE("the model FLOPs split into the dense layers' GEMMs and attention", "[fit_check][flops]") {
  // GPT-2 (L=12, h=768, 12 heads of 64), s=1024: attention's forward per token is 2 x L x s x (q width + out
  // width) = 2 x 12 x 1,024 x 1,536 = 37,748,736 FLOPs; the backward twice that: x 3, over 8,192 tokens.
  const step_flops f = check_on("gpt2", "h100", gpt2_run()).plan.flops;
  CHECK(f.model_attention_per_step == Approx(3.0 * 37'748'736.0 * 8192.0).epsilon(1e-12));
  CHECK(f.model_gemm_per_step + f.model_attention_per_step == Approx(f.model_per_step).epsilon(1e-12));
  CHECK(f.model_gemm_per_step == Approx(3.0 * f.gemm_forward_per_token * 8192.0).epsilon(1e-12));
}

TEST_CASE("the host's work against the GPU's: bound by the host where it is longer", "[fit_check][time]") {
  // The host's work is its time less its fixed cost a step (the stack's timing constants).
  for (const char* profile : {"hf", "trainplan"}) {
    run_config r = gpt2_run(profile);
    r.micro_batch = 1;
    r.seq = 128;
    const fit_check c = check_on("gpt2", "h100", r);
    const op_time_breakdown& b = c.plan.time.breakdown;
    CHECK(b.host_work_seconds == b.host_seconds - c.plan.calib.timing(profile).step_seconds);
    CHECK(b.host_bound() == (b.host_work_seconds > b.device_seconds));
  }
}

TEST_CASE("model state filling the GPU, tightness, and the suggestions only where it does not fit", "[fit_check][suggest]") {
  // Llama-2-7B, full fine-tuning with AdamW in bf16-mixed: about 6.7e9 x 16 bytes of model state, far above half of
  // an H100's 80 GB; GPT-2's 124M parameters x 16 bytes, about 2 GB, far below.
  const gpu_spec& h100 = data().gpu("h100");
  const calibration calib = data().calibration_for(h100);
  // plan search's budget: the GPU less the calibration's safety margin; above it a fit is tight.
  const auto budget = static_cast<std::uint64_t>(std::floor(static_cast<double>(h100.memory_bytes) * (1.0 - calib.safety_margin_fraction)));
  run_config run;
  run.seq = 4096;
  const model_spec& llama = data().model("llama-2-7b").spec;
  fit_check big = check_fit(llama, run, h100, calib);
  CHECK_FALSE(big.plan.fits);
  CHECK(big.model_state_fills_gpu);
  CHECK_FALSE(big.tight);
  CHECK(big.suggestions.empty());  // not asked for yet
  add_suggestions(big, llama, run, h100, calib, {4});
  REQUIRE(!big.suggestions.empty());
  CHECK(big.suggestions.size() <= 4);
  for (const fit_suggestion& s : big.suggestions) {
    CHECK(s.tight == (s.peak_bytes > budget));
    if (s.roomiest) CHECK(s.roomiest->tight == (s.roomiest->peak_bytes > budget));
  }
  CHECK(big.same_numerics_floor_bytes.has_value() == (big.suggestions.front().costs != cost_none));
  fit_check none = check_fit(llama, run, h100, calib);
  add_suggestions(none, llama, run, h100, calib, {0});
  CHECK(none.suggestions.empty());
  CHECK_FALSE(none.same_numerics_floor_bytes);

  fit_check small = check_on("gpt2", "h100", gpt2_run());
  CHECK(small.plan.fits);
  CHECK_FALSE(small.model_state_fills_gpu);
  CHECK(small.tight == (small.plan.peak_bytes > budget));
  add_suggestions(small, data().model("gpt2").spec, gpt2_run(), h100, calib, {4});
  CHECK(small.suggestions.empty());  // it fits: nothing to suggest
}
