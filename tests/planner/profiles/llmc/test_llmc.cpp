// --framework llmc against llm.c's own "device memory usage" on an H100 80GB HBM3 (CUDA 13.0, no cuDNN,
// -O3 for sm_90, default -r 1), from the shared measurements' README (tests/data/measurements/README.md).
#include <catch2/catch.hpp>

#include "planner/util/input_error.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/profiles/llmc/inventory_llmc.hpp"
#include "planner/evaluate/plan.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;

namespace {

// llm.c's measured runs: GPT-2 shapes at T = 1024, built without cuDNN, its default -r 1.
plan_result plan_llmc(std::uint64_t layers, std::uint64_t hidden, std::uint64_t heads, std::uint64_t batch) {
  const gpu_spec& h100 = test::data().gpu("h100");
  model_spec m = test::gpt_shape(layers, hidden, heads, 50257);
  m.max_positions = 1024;
  run_config run;
  run.profile = &profile_named("llmc");
  run.seq = 1024;
  run.micro_batch = batch;
  run.dropout = 0;
  run.attention = attention_kind::eager;      // built without cuDNN
  run.recompute = recompute_mode::selective;  // llm.c -r 1, its default
  return evaluate_plan(m, run, h100, test::data().calibration_for(h100));
}

}  // namespace

TEST_CASE("llmc profile: llm.c's device memory on an H100 within 5%", "[framework][llmc]") {
  struct row {
    std::uint64_t layers, hidden, heads, batch, measured_mib;
  };
  // GPT-2 124M (d12) at B16, GPT-2 1.56B (d48) at B4 and B8; T = 1024.
  const row rows[] = {{12, 768, 12, 16, 12370}, {48, 1600, 25, 4, 41672}, {48, 1600, 25, 8, 59006}};
  for (const row& r : rows) {
    const plan_result p = plan_llmc(r.layers, r.hidden, r.heads, r.batch);
    const double measured = static_cast<double>(r.measured_mib) * 1048576.0;
    WARN("d" << r.layers << " B" << r.batch << ": predicted " << p.peak_bytes / 1048576.0 << " MiB, measured " << r.measured_mib);
    // Tolerance: issue 9's 5% for the device level.
    CHECK(std::abs(static_cast<double>(p.peak_bytes) - measured) <= 0.05 * measured);
  }
}

// The same runs' step times (llm.c's own report at steps 20-25: 51.4, 146.1 and 261.0 ms), predicted with the
// llmc profile's literature constants (data/calibration.json: nothing is fitted to llm.c). The head's GEMMs
// run over llm.c's padded vocabulary (50,304 rows). Tolerance: issue 10's 15% for runs the model was not
// fitted on.
TEST_CASE("llmc profile: llm.c's step times on an H100 within 15%", "[framework][llmc][time]") {
  struct row {
    std::uint64_t layers, hidden, heads, batch;
    double measured_s;
  };
  const row rows[] = {{12, 768, 12, 16, 0.0514}, {48, 1600, 25, 4, 0.1461}, {48, 1600, 25, 8, 0.2610}};
  for (const row& r : rows) {
    const plan_result p = plan_llmc(r.layers, r.hidden, r.heads, r.batch);
    WARN("d" << r.layers << " B" << r.batch << ": predicted " << p.time.step_seconds << " s, measured " << r.measured_s);
    CHECK(std::abs(p.time.step_seconds - r.measured_s) <= 0.15 * r.measured_s);
  }
}

TEST_CASE("llmc profile: parameters padded to llm.c's vocabulary, everything allocated once", "[framework][llmc]") {
  model_spec m = test::gpt_shape(12, 768, 12, 50257);
  CHECK(vocab_rows(m, profile_named("llmc").traits.vocab_pad_multiple) == 50304);
  m.max_positions = 1024;
  run_config run;
  run.profile = &profile_named("llmc");
  run.seq = 1024;
  run.micro_batch = 4;
  run.dropout = 0;
  run.recompute = recompute_mode::selective;  // llm.c -r 1
  const inventory inv = build_llmc_inventory(m, run, make_precision_layout(run.precision, run.grad_dtype));
  // llm.c's GPT-2 124M has 124,475,904 parameters (50304 x 768 embedding): train_gpt2.cu prints it.
  CHECK(inv.tensors.front().name == "weights.bf16");
  CHECK(inv.tensors.front().bytes == 2u * 124475904u);
  // The GELU output is one [B, T, 4C] buffer under llm.c's default recomputation.
  bool found = false;
  for (const tensor_spec& t : inv.tensors)
    if (t.name == "fch_gelu") {
      found = true;
      CHECK(t.bytes == 2u * 4 * 1024 * 4 * 768);
    }
  CHECK(found);
  run.dropout = 0.1;
  CHECK_THROWS_AS(build_llmc_inventory(m, run, make_precision_layout(run.precision, run.grad_dtype)), trainplan::input_error);
}
