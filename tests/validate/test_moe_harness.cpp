// The harness's Mixture-of-Experts layer (validate/transformer.cpp, kernels/moe_*.cpp) against the
// planner's trainplan inventory, and as training: the tiny MoE of test_helpers.hpp (2 layers, h 32, 4
// heads, 2 kv heads, 4 experts of width 16, top-2, V 64), dropless and with capacity factors 1.0 and 1.5.
#include <catch2/catch.hpp>

#include <cmath>

#include "tests/support/test_helpers.hpp"
#include "planner/util/input_error.hpp"
#include "planner/run/moe.hpp"
#include "validate/training_run.hpp"
#include "validate/validation.hpp"

using namespace trainplan;
using namespace trainplan::test;

TEST_CASE("planner and harness agree buffer by buffer on a tiny MoE, dropless and with capacity", "[validate][moe]") {
  int configurations = 0;
  for (double capacity : {0.0, 1.0, 1.5})
    for (recompute_mode rc : {recompute_mode::none, recompute_mode::selective, recompute_mode::full})
      for (attention_kind att : {attention_kind::eager, attention_kind::flash})
        for (precision_regime p : {precision_regime::fp32, precision_regime::bf16_mixed}) {
          const model_spec m = tiny_moe_model();
          run_config r = run_of(16, 2, rc, att, 0.0);
          r.grad_accum = 2;
          r.precision = p;
          r.capacity_factor = capacity;
          INFO("capacity " << capacity << " " << recompute_name(rc) << " " << attention_name(att) << " " << precision_name(p));
          const validate::validation_result v = validate::validate_on_cpu(m, r, {});
          CHECK(v.measured_peak_bytes == v.predicted_peak_bytes);
          bool saw_experts = false;
          for (const validate::tensor_comparison& t : v.tensors) {
            INFO(t.name << " predicted " << t.predicted_bytes << " measured " << t.measured_bytes);
            CHECK(t.matches());
            saw_experts = saw_experts || t.name == "layer{}.moe.expert_out";
          }
          CHECK(saw_experts);
          for (const validate::timeline_row& row : v.timeline) {
            INFO(row.phase);
            CHECK(row.measured_bytes == row.predicted_bytes);
          }
          ++configurations;
        }
  CHECK(configurations == 36);
}

namespace {

std::vector<float> moe_gradients(const run_config& r) {
  validate::training_run run(tiny_moe_model(), r);
  run.net.run_micro_batch(0, 0, 1.0f);
  const kernels::view g = run.state.grads.view();
  std::vector<float> out(g.size);
  for (std::size_t i = 0; i < g.size; ++i) out[i] = g.get(i);
  return out;
}

}  // namespace

TEST_CASE("MoE recomputation reproduces the gradients exactly in fp32", "[validate][moe]") {
  for (double capacity : {0.0, 1.0}) {
    INFO("capacity " << capacity);
    run_config base = run_of(16, 2, recompute_mode::none, attention_kind::flash, 0.0);
    base.precision = precision_regime::fp32;
    base.capacity_factor = capacity;
    const std::vector<float> reference = moe_gradients(base);
    double norm = 0;
    for (float x : reference) norm += static_cast<double>(x) * x;
    CHECK(norm > 0);
    for (recompute_mode rc : {recompute_mode::selective, recompute_mode::full}) {
      run_config r = base;
      r.recompute = rc;
      INFO(recompute_name(rc));
      // Recomputation reruns the same fp32 operations in the same order, so the same routing: identical.
      CHECK(moe_gradients(r) == reference);
    }
  }
}

TEST_CASE("a tiny MoE learns: the loss on one batch falls over a few steps, dropless and with capacity", "[validate][moe]") {
  for (double capacity : {0.0, 1.0, 1.5}) {
    INFO("capacity " << capacity);
    const model_spec m = tiny_moe_model();
    run_config r = run_of(16, 2, recompute_mode::full, attention_kind::flash, 0.0);
    r.grad_accum = 2;
    r.capacity_factor = capacity;
    validate::training_options opt;
    opt.steps = 6;
    opt.adamw.lr = 1e-2f;  // as the dense "training on one batch lowers the loss"
    validate::training_run run(m, r, opt);
    // The same two micro-batches every step, so the loss must fall (as for the dense model).
    std::vector<std::int32_t> tokens(32), targets(32);
    for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>((7 * i + 3) % m.vocab), targets[i] = static_cast<std::int32_t>((5 * i + 1) % m.vocab);
    run.net.fixed_tokens = tokens;
    run.net.fixed_targets = targets;
    run.run();
    REQUIRE(run.records.size() == 6);
    INFO("first " << run.records.front().loss << " last " << run.records.back().loss);
    CHECK(std::isfinite(run.records.back().loss));
    CHECK(run.records.back().loss < run.records.front().loss - 0.05);
  }
}

TEST_CASE("the harness runs MoE on the CPU backend only, without shared experts or q/k norms", "[validate][moe]") {
  const run_config r = run_of(16, 1, recompute_mode::none, attention_kind::flash, 0.0);
  CHECK_NOTHROW(validate::check_harness_supports(tiny_moe_model(), r));
  model_spec shared = tiny_moe_model();
  shared.shared_expert_ffn = 16;
  CHECK_THROWS_AS(validate::check_harness_supports(shared, r), input_error);
  model_spec qk = tiny_moe_model();
  qk.qk_norm = true;
  CHECK_THROWS_AS(validate::check_harness_supports(qk, r), input_error);
  // A backend without the routing kernels (the CUDA table leaves them null) refuses with a clear message.
  kernels::kernel_ops no_moe = kernels::cpu_kernel_ops();
  no_moe.moe_router_forward = nullptr;
  CHECK_THROWS_WITH(validate::validate_on(no_moe, tiny_moe_model(), r, {}), Catch::Contains("MoE runs on the CPU backend only"));
}
