// The runs plan validate measures (planner/measure/validation_runs.hpp): the GPU suite's cases and its
// boundaries, and a run's cost on the CPU backend.
#include <catch2/catch.hpp>

#include "planner/evaluate/plan.hpp"
#include "planner/measure/validation_runs.hpp"
#include "planner/model/model_facts.hpp"
#include "planner/search/search.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using trainplan::test::data;

TEST_CASE("gpu_validation_suite: the fixed cases, then the boundaries the planner's verdicts draw", "[validate]") {
  const gpu_spec& h100 = data().gpu("h100");
  const calibration calib = data().calibration_for(h100);
  const std::vector<validation_case> cases = gpu_validation_suite(data(), h100, calib);
  // 2 models x 3 recomputations x 2 attention kernels, 7 of accumulation, micro-batch and precision, 3 sequence
  // lengths and the two micro-batches at the GPU's edge: 24.
  REQUIRE(cases.size() == 12 + 7 + 3 + 2);
  for (std::size_t i = 0; i + 1 < cases.size(); ++i) CHECK(cases[i].expect_fit);
  CHECK_FALSE(cases.back().expect_fit);

  const sweep_model tiny{data().model("tinyllama-1.1b").spec, describe_model(data().model("tinyllama-1.1b").spec)};
  const sweep_gpu g{h100, calib};
  auto fits = [&](run_config r, double margin) {
    const std::optional<config_summary> s = summarize_config(tiny, g, r, margin);
    return s && s->fits;
  };
  // The long sequence: at most 32,768, and fitting with the search's margin.
  const validation_case& longest = cases[cases.size() - 3];
  CHECK(longest.run.seq <= 32768);
  CHECK(fits(longest.run, calib.safety_margin_fraction));
  // ~95%: the largest micro-batch within a 5% margin (one more is over it).
  const validation_case& near = cases[cases.size() - 2];
  CHECK(fits(near.run, 0.05));
  run_config more = near.run;
  ++more.micro_batch;
  CHECK_FALSE(fits(more, 0.05));
  // Predicted not to fit: one more than the largest micro-batch that fits the whole GPU.
  const validation_case& over = cases.back();
  CHECK_FALSE(fits(over.run, 0.0));
  run_config less = over.run;
  --less.micro_batch;
  CHECK(fits(less, 0.0));
}

TEST_CASE("validation_run_cost: the tensor peak of the run's stack and its hardware FLOPs over the steps", "[validate]") {
  // The harness's tiny GPT (L=2, h=32, 4 heads, V=64 padded to 128 as llm.c pads), s=64, one sequence, eager
  // attention, no recomputation. GEMM weights: 12 h^2 a layer x 2 = 24,576, the head V h = 2,048: forward 2 x
  // 26,624 = 53,248 FLOPs a token; attention 2 x (L s = 128 keys) x (32 + 32) = 16,384. Model FLOPs 3 x 69,632
  // x 64 tokens = 13,369,344; the head's 64 padded rows add 3 x 2 x 32 x 64 x 64 = 786,432: 14,155,776 a step.
  const model_spec m = test::tiny_model(model_family::gpt);
  run_config run;
  run.seq = 64;
  run.attention = attention_kind::eager;
  const validation_cost two = validation_run_cost(m, run, 2);
  CHECK(two.hardware_flops == 2.0 * 14'155'776.0);
  CHECK(validation_run_cost(m, run, 4).hardware_flops == 4.0 * 14'155'776.0);
  // The same tensor peak the plan gives (the run's stack's inventory, walked to its peak).
  const gpu_spec& h100 = data().gpu("h100");
  CHECK(two.tensor_peak_bytes == evaluate_plan(m, run, h100, data().calibration_for(h100)).tensor_peak_bytes);
}
