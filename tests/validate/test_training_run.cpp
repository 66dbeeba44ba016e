#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>

#include "tests/support/test_helpers.hpp"
#include "kernels/device_arena.hpp"
#include "planner/util/input_error.hpp"
#include "validate/training_run.hpp"
#include "validate/validation.hpp"

using namespace trainplan;
using namespace trainplan::test;

namespace {

model_spec tiny(model_family family) { return tiny_model(family, 48); }

// Gradients of one micro-batch, flattened.
std::vector<float> gradients(const model_spec& m, const run_config& r) {
  validate::training_run run(m, r);
  run.net.run_micro_batch(0, 0, 1.0f);
  const kernels::view g = run.state.grads.view();
  std::vector<float> out(g.size);
  for (std::size_t i = 0; i < g.size; ++i) out[i] = g.get(i);
  return out;
}

double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double scale = 0, worst = 0;
  for (float x : a) scale = std::max(scale, static_cast<double>(std::abs(x)));
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  return worst / scale;
}

}  // namespace

TEST_CASE("recompute modes and eager/flash attention give the same gradients in fp32", "[validate]") {
  for (model_family family : {model_family::gpt, model_family::llama}) {
    for (double dropout : {0.0, 0.1}) {
      INFO(family_name(family) << " dropout " << dropout);
      const model_spec m = tiny(family);
      run_config base = run_of(24, 2, recompute_mode::none, attention_kind::eager, dropout);
      base.precision = precision_regime::fp32;
      const std::vector<float> reference = gradients(m, base);
      for (recompute_mode rc : {recompute_mode::none, recompute_mode::selective, recompute_mode::full})
        for (attention_kind att : {attention_kind::eager, attention_kind::flash}) {
          run_config r = base;
          r.recompute = rc;
          r.attention = att;
          INFO(recompute_name(rc) << " " << attention_name(att));
          // Recomputation reruns the same fp32 operations: identical. Flash sums in another order
          // (tiles, online rescaling): 1e-5 of the largest gradient.
          CHECK(max_relative_difference(reference, gradients(m, r)) <= 1e-5);
        }
    }
  }
}

TEST_CASE("recomputation in bf16 reproduces the forward bit for bit", "[validate]") {
  const model_spec m = tiny(model_family::gpt);
  run_config r = run_of(24, 2, recompute_mode::none, attention_kind::eager, 0.1);
  const std::vector<float> none = gradients(m, r);
  r.recompute = recompute_mode::full;
  CHECK(max_relative_difference(none, gradients(m, r)) == 0.0);
}

TEST_CASE("the padded vocabulary matches the planner and keeps V classes", "[validate][vocab]") {
  // The harness pads V = 301 to 384 rows as llm.c does (planner/model/param_count.hpp vocab_rows). The planner's
  // trainplan inventory must still match to the byte, and the loss must be over the 301 classes only.
  const std::uint64_t V = 301, Vp = 384;
  for (model_family family : {model_family::gpt, model_family::llama})
    for (precision_regime p : {precision_regime::fp32, precision_regime::bf16_mixed}) {
      const model_spec m = tiny_model(family, V);
      INFO(family_name(m.family) << " " << precision_name(p));
      run_config r = run_of(16, 2, recompute_mode::none, attention_kind::flash, 0.0);
      r.precision = p;
      const validate::validation_result v = validate::validate_on_cpu(m, r, {});
      CHECK(v.measured_peak_bytes == v.predicted_peak_bytes);
      for (const validate::tensor_comparison& t : v.tensors) {
        INFO(t.name << " predicted " << t.predicted_bytes << " measured " << t.measured_bytes);
        CHECK(t.matches());
        if (t.name == "logits") CHECK(t.measured_bytes == 2 * 16 * Vp * dtype_bytes(make_precision_layout(p, r.grad_dtype).activations));
      }
      // At initialization the logits are near zero (weights 0.02 * u, h = 32: |z| about 0.1), so the loss is
      // within 0.05 of ln V; over the padded columns too it would be near ln Vp, 0.24 more.
      REQUIRE_FALSE(v.steps_run.empty());
      CHECK(std::abs(v.steps_run.front().loss - std::log(static_cast<double>(V))) < 0.1);

      validate::training_run run(m, r);
      const std::uint64_t tables = m.tied_embeddings ? 1 : 2;
      CHECK(run.state.params() == count_params(m).total + tables * (Vp - V) * m.hidden);
      run.step();
      run.step();
      // The padded rows stay zero through AdamW, in the weights and the fp32 master copy.
      for (const char* table : {"embed.tokens", "lm_head.weight"}) {
        if (!run.state.has(table)) continue;
        const kernels::view w = run.state.weight(table);
        REQUIRE(w.size == Vp * m.hidden);
        for (std::size_t i = V * m.hidden; i < w.size; ++i) REQUIRE(w.get(i) == 0.0f);
        if (!run.state.master) continue;
        // The master copy has the weights' layout: the same element offset.
        const std::size_t offset = static_cast<std::size_t>(static_cast<const std::byte*>(w.data) -
                                                            static_cast<const std::byte*>(run.state.weights.view().data)) /
                                   dtype_bytes(w.type);
        const kernels::view master = run.state.master.view().slice(offset, w.size);
        for (std::size_t i = V * m.hidden; i < w.size; ++i) REQUIRE(master.get(i) == 0.0f);
      }
    }
}

TEST_CASE("training on one batch lowers the loss", "[validate]") {
  for (precision_regime p : {precision_regime::fp32, precision_regime::bf16_mixed, precision_regime::fp16_mixed}) {
    INFO(precision_name(p));
    run_config r = run_of(16, 2, recompute_mode::none, attention_kind::flash, 0.0);
    r.precision = p;
    validate::training_options opt;
    opt.adamw.lr = 1e-2f;
    validate::training_run run(tiny(model_family::llama), r, opt);
    run.net.fixed_tokens = std::vector<std::int32_t>(32, 3);
    std::vector<std::int32_t> targets(32);
    for (std::size_t i = 0; i < targets.size(); ++i) targets[i] = static_cast<std::int32_t>(i % 5);
    run.net.fixed_targets = targets;
    const double first = run.step().loss;
    for (int i = 0; i < 10; ++i) run.step();
    CHECK(run.records.back().loss < first - 0.5);
  }
}

TEST_CASE("token and target ids outside the vocabulary are refused before the step uses them", "[validate]") {
  const model_spec m = tiny(model_family::gpt);
  run_config r = run_of(16, 2, recompute_mode::none, attention_kind::eager, 0.0);
  r.precision = precision_regime::fp32;
  const auto vocab = static_cast<std::int32_t>(m.vocab);
  auto attempt = [&](std::int32_t token, std::int32_t target, std::size_t count) {
    validate::training_run run(m, r);
    run.net.fixed_tokens = std::vector<std::int32_t>(count, 1);
    run.net.fixed_targets = std::vector<std::int32_t>(count, 2);
    (*run.net.fixed_tokens)[7] = token;
    (*run.net.fixed_targets)[9] = target;
    run.net.run_micro_batch(0, 0, 1.0f);
  };
  CHECK_NOTHROW(attempt(vocab - 1, vocab - 1, 32));
  CHECK_THROWS_WITH(attempt(vocab, 0, 32), Catch::Contains("token id " + std::to_string(vocab) + " at position 7"));
  CHECK_THROWS_WITH(attempt(0, -1, 32), Catch::Contains("target id -1 at position 9 is outside the vocabulary"));
  CHECK_THROWS_WITH(attempt(0, 0, 31), Catch::Contains("31 fixed ids given for a batch of 2 x 16"));
}

TEST_CASE("gradient accumulation averages micro-batches: 2 x 1 equals 1 x 2 on the same data", "[validate]") {
  const model_spec m = tiny(model_family::gpt);
  run_config one = run_of(16, 2, recompute_mode::none, attention_kind::eager, 0.0);
  one.precision = precision_regime::fp32;
  std::vector<std::int32_t> tokens(32), targets(32);
  for (std::size_t i = 0; i < 32; ++i) tokens[i] = static_cast<std::int32_t>((i * 7) % 48), targets[i] = static_cast<std::int32_t>((i * 5 + 1) % 48);
  validate::training_run big(m, one);
  big.net.fixed_tokens = tokens;
  big.net.fixed_targets = targets;
  big.net.run_micro_batch(0, 0, 1.0f);

  run_config two = one;
  two.micro_batch = 1;
  two.grad_accum = 2;
  validate::training_run small(m, two);
  for (std::uint64_t mb = 0; mb < 2; ++mb) {
    small.net.fixed_tokens = std::vector<std::int32_t>(tokens.begin() + 16 * mb, tokens.begin() + 16 * (mb + 1));
    small.net.fixed_targets = std::vector<std::int32_t>(targets.begin() + 16 * mb, targets.begin() + 16 * (mb + 1));
    small.net.run_micro_batch(0, mb, 1.0f);
  }
  const kernels::view a = big.state.grads.view(), b = small.state.grads.view();
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < a.size; ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(a.get(i) - b.get(i))));
    scale = std::max(scale, static_cast<double>(std::abs(a.get(i))));
  }
  CHECK(worst <= 1e-5 * scale);  // fp32, the same sums split in two
}

TEST_CASE("fp16 dynamic loss scaling skips a step with overflowing gradients and halves the scale", "[validate]") {
  run_config r = run_of(16, 1, recompute_mode::none, attention_kind::eager, 0.0);
  r.precision = precision_regime::fp16_mixed;
  validate::training_options opt;
  opt.initial_loss_scale = 1e30f;  // overflows fp16 (max 65504) in the loss gradient
  validate::training_run run(tiny(model_family::gpt), r, opt);
  const validate::step_record first = run.step();
  CHECK(first.skipped);
  CHECK(run.state.adam_m.empty());  // a skipped step creates no optimizer state
  const validate::step_record second = run.step();
  CHECK(second.loss_scale == Approx(0.5e30f));
  opt.initial_loss_scale = 1024.0f;
  validate::training_run ok(tiny(model_family::gpt), r, opt);
  CHECK_FALSE(ok.step().skipped);
  CHECK_FALSE(ok.state.adam_m.empty());
}

TEST_CASE("the harness refuses regimes it does not implement", "[validate]") {
  run_config r = run_of(16, 1, recompute_mode::none, attention_kind::eager, 0.0);
  r.precision = precision_regime::fp8_mixed;
  CHECK_THROWS_AS(validate::check_harness_supports(tiny(model_family::gpt), r), input_error);
  r.precision = precision_regime::bf16_mixed;
  r.optimizer = optimizer_kind::lion;
  CHECK_THROWS_AS(validate::check_harness_supports(tiny(model_family::gpt), r), input_error);
  r.optimizer = optimizer_kind::adamw;
  r.gpus = 2;
  r.zero = 3;
  CHECK_THROWS_AS(validate::check_harness_supports(tiny(model_family::gpt), r), input_error);
  r.gpus = 1;
  r.zero = 0;
  r.finetune = finetune_kind::lora;
  CHECK_THROWS_AS(validate::check_harness_supports(tiny(model_family::gpt), r), input_error);
}

TEST_CASE("a validation fails when the peak is off by more than the tolerance or a buffer differs", "[validate]") {
  validate::validation_result r;
  r.delta_pct = 0.4;
  r.tensors.push_back({"weights.bf16", 100, 100, true, true});
  CHECK(r.passed(0.5));
  r.delta_pct = -0.6;
  CHECK_FALSE(r.passed(0.5));
  r.delta_pct = 0.0;
  r.tensors.push_back({"layer{}.attn.qkv", 64, 32, true, true});
  CHECK_FALSE(r.passed(0.5));
  r.tensors.back().measured_bytes = 64;
  r.tensors.push_back({"bwd.extra", 0, 8, false, true});  // allocated but not predicted
  CHECK_FALSE(r.passed(0.5));
}

namespace {
// A CPU backend with a memory budget: what a full GPU does, without a GPU.
std::size_t budget_left = 0;
void* budgeted_alloc(std::size_t bytes) {
  if (bytes > budget_left) throw kernels::device_out_of_memory("out of memory (test budget)");
  budget_left -= bytes;
  return kernels::cpu_kernel_ops().alloc(bytes);
}
}  // namespace

TEST_CASE("running out of memory is a result naming the phase and the buffer, and frees everything", "[validate]") {
  const model_spec m = tiny(model_family::gpt);
  run_config r = run_of(16, 2, recompute_mode::none, attention_kind::eager, 0.1);
  const validate::validation_result fits = validate::validate_on_cpu(m, r, {});
  kernels::kernel_ops small = kernels::cpu_kernel_ops();
  small.alloc = budgeted_alloc;
  // Enough for the weights but not for step 2's peak: the failure comes mid-step, after buffers exist.
  budget_left = fits.measured_peak_bytes - 4096;
  try {
    validate::validate_on(small, m, r, {});
    FAIL("the run should have run out of memory");
  } catch (const validate::out_of_memory& oom) {
    CHECK_FALSE(oom.buffer_name.empty());
    CHECK(oom.requested_bytes > 0);
    CHECK_THAT(oom.phase_label, Catch::Contains("step"));
  }
}

namespace {
// A backend whose allocation fails for another reason than memory (on the GPU: an earlier kernel's fault
// surfacing in the zero fill).
void* faulting_alloc(std::size_t) { throw std::logic_error("an earlier kernel faulted (test)"); }
}  // namespace

TEST_CASE("an allocation that fails for another reason than memory is not reported as out of memory", "[validate]") {
  kernels::kernel_ops faulty = kernels::cpu_kernel_ops();
  faulty.alloc = faulting_alloc;
  CHECK_THROWS_WITH(validate::validate_on(faulty, tiny(model_family::gpt), run_of(16, 2, recompute_mode::none,
                                                                                   attention_kind::eager, 0.1), {}),
                    Catch::Contains("an earlier kernel faulted"));
  try {
    validate::validate_on(faulty, tiny(model_family::gpt), run_of(16, 2, recompute_mode::none, attention_kind::eager, 0.1), {});
  } catch (const validate::out_of_memory&) {
    FAIL("reported as out of memory");
  } catch (const std::logic_error&) {
    SUCCEED("propagated as itself");
  }
}

TEST_CASE("the CPU table and the harness agree with the planner through the ops table", "[validate]") {
  const kernels::kernel_ops& cpu = kernels::cpu_kernel_ops();
  CHECK(std::string(cpu.backend) == "cpu");
  CHECK(cpu.device_used_bytes() == 0);
  const validate::validation_result v =
      validate::validate_on(cpu, tiny(model_family::llama), run_of(16, 2, recompute_mode::full, attention_kind::flash, 0.0), {});
  CHECK(v.backend == "cpu");
  CHECK_FALSE(v.device.has_value());
  CHECK(v.measured_peak_bytes == v.predicted_peak_bytes);
}

// On a device the step time averages enough steady steps to mean something: past the requested steps, until
// they add up to device_timing_min_seconds or device_timing_max_steps are timed. Without one, exactly the
// requested steps run. (The CPU table stands in for a device here: only the timing loop is under test.)
TEST_CASE("a device run times steady steps until half a second or twenty of them", "[validate]") {
  const kernels::kernel_ops& cpu = kernels::cpu_kernel_ops();
  const run_config r = run_of(16, 2, recompute_mode::none, attention_kind::flash, 0.0);
  validate::training_options options;
  options.steps = 3;
  const validate::validation_result plain = validate::validate_on(cpu, tiny(model_family::llama), r, options);
  CHECK(plain.steps == 3);
  validate::device_measurements device;
  device.name = "the CPU, standing in";
  const validate::validation_result timed = validate::validate_on(cpu, tiny(model_family::llama), r, options, &device);
  REQUIRE(timed.device.has_value());
  const int steady = timed.steps - 1;
  CHECK(steady >= options.steps - 1);
  CHECK(steady <= validate::device_timing_max_steps);
  // It stopped at one limit or the other: twenty steps, or enough time.
  CHECK((steady == validate::device_timing_max_steps || steady * timed.device->step_seconds >= validate::device_timing_min_seconds));
  CHECK(timed.device->step_seconds > 0);
  CHECK(timed.measured_peak_bytes == plain.measured_peak_bytes);  // later steps change no peak
}
