// A timed step's rates (planner/measure/measured_step.hpp), worked out by hand.
#include <catch2/catch.hpp>

#include "planner/measure/measured_step.hpp"

using namespace trainplan;

TEST_CASE("rates_of_measured_step: tokens over the measured step, FLOPs over the step at the dense peak", "[bench]") {
  plan_result p;
  p.flops.tokens_per_step = 8192;
  p.flops.model_per_step = 1e15;
  p.flops.hardware_per_step = 1.2e15;
  p.time.peak_flops_per_s = 1e15;
  // A 2 s step: 8,192 / 2 = 4,096 tokens/s; 1e15 / (2 x 1e15) = 0.5 MFU; 1.2e15 / 2e15 = 0.6 HFU.
  const measured_rates r = rates_of_measured_step(p, 2.0);
  CHECK(r.tokens_per_second == 4096);
  CHECK(r.mfu == Approx(0.5).epsilon(1e-15));
  CHECK(r.hfu == Approx(0.6).epsilon(1e-15));
}
