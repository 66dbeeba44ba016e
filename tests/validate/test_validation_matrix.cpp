// The planner against the harness on tiny shapes, over the whole matrix of issue 3: family x recompute x
// attention x accumulation x micro-batch x precision. The planner's tensor peak must equal what the
// tracking allocator measured within 0.5% (the tolerance; in practice it is exact, since both
// count the same buffers at the same events), and every named buffer must have the size allocated.
#include <catch2/catch.hpp>

#include "tests/support/test_helpers.hpp"
#include "validate/validation.hpp"

using namespace trainplan;
using namespace trainplan::test;

TEST_CASE("planner and harness agree on every configuration of the matrix", "[validate][matrix]") {
  int configurations = 0;
  for (model_family family : {model_family::gpt, model_family::llama})
    for (recompute_mode rc : {recompute_mode::none, recompute_mode::selective, recompute_mode::full})
      for (attention_kind att : {attention_kind::eager, attention_kind::flash})
        for (std::uint64_t accum : {1, 4})
          for (std::uint64_t mb : {1, 2})
            for (precision_regime p : {precision_regime::fp32, precision_regime::bf16_mixed, precision_regime::fp16_mixed}) {
              const model_spec m = tiny_model(family);
              const double dropout = m.dropout;
              run_config r = run_of(16, mb, rc, att, dropout);
              r.grad_accum = accum;
              r.precision = p;
              INFO(family_name(family) << " " << recompute_name(rc) << " " << attention_name(att) << " accum " << accum
                                       << " mb " << mb << " " << precision_name(p));
              const validate::validation_result v = validate::validate_on_cpu(m, r, {});
              CHECK(std::abs(v.delta_pct) <= 0.5);
              CHECK(v.measured_peak_bytes == v.predicted_peak_bytes);
              for (const validate::tensor_comparison& t : v.tensors) {
                INFO(t.name << " predicted " << t.predicted_bytes << " measured " << t.measured_bytes);
                CHECK(t.matches());
              }
              for (const validate::timeline_row& row : v.timeline) {
                INFO(row.phase);
                CHECK(row.measured_bytes == row.predicted_bytes);
              }
              ++configurations;
            }
  CHECK(configurations == 144);
}
