// plan max's search without the CLI (planner/search/max_search.hpp): the answers against independent oracles.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>

#include "planner/io/shape_from_params.hpp"
#include "planner/model/model_facts.hpp"
#include "planner/model/param_count.hpp"
#include "planner/search/levers.hpp"
#include "planner/search/max_search.hpp"
#include "planner/search/search.hpp"
#include "planner/util/input_error.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using trainplan::test::data;

namespace {

max_question question(max_quantity what, const std::string& model, const std::string& gpu, const run_config& run,
                      double margin = 0) {
  max_question q;
  q.what = what;
  const model_spec& spec = data().model(model).spec;
  q.model = {spec, describe_model(spec)};
  q.run = run;
  const gpu_spec& g = data().gpu(gpu);
  q.gpu = {g, data().calibration_for(g)};
  q.margin = margin;
  return q;
}

// The peak summarize_config gives one micro-batch of the question's run.
std::uint64_t peak_at(const max_question& q, std::uint64_t micro_batch) {
  run_config r = q.run;
  r.micro_batch = micro_batch;
  const std::optional<config_summary> s = summarize_config(q.model, q.gpu, r, q.margin);
  REQUIRE(s);
  return s->peak_bytes;
}

}  // namespace

TEST_CASE("find_max micro-batch: where the peak grows by the same bytes each micro-batch, the last before the budget",
          "[max]") {
  // The harness (no allocator replay): GPT-2, s=1024, on a 24 GB L4. Activations and logits grow linearly with
  // the micro-batch and model state does not, so peak(b) = A + B b with B = peak(2) - peak(1) (checked at 3). The
  // slack (a fraction of the tensors, rounded down) makes B exact to a byte, so the line is exact to b bytes at b:
  // the answer is floor((budget - A) / B), the budget the whole GPU, unless the budget falls within those bytes.
  run_config run;
  run.seq = 1024;
  const max_question q = question(max_quantity::micro_batch, "gpt2", "l4", run);
  const std::uint64_t p1 = peak_at(q, 1), p2 = peak_at(q, 2), p3 = peak_at(q, 3);
  const std::int64_t B = static_cast<std::int64_t>(p2 - p1);
  REQUIRE(std::llabs(static_cast<std::int64_t>(p3 - p2) - B) <= 1);
  const std::int64_t A = static_cast<std::int64_t>(p1) - B;
  const std::uint64_t budget = q.gpu.spec.memory_bytes;
  const std::uint64_t expected = static_cast<std::uint64_t>((static_cast<std::int64_t>(budget) - A) / B);
  REQUIRE(expected > 3);

  const max_answer a = find_max(q);
  REQUIRE(a.best);
  CHECK(*a.best == expected);
  CHECK(a.value == expected);
  CHECK(a.run.micro_batch == expected);
  CHECK(a.next == expected + 1);
  CHECK(a.misses_below.empty());  // monotone: nothing below fails
  REQUIRE(a.at_max);
  CHECK(std::llabs(static_cast<std::int64_t>(a.at_max->peak_bytes) - (A + B * static_cast<std::int64_t>(expected))) <=
        static_cast<std::int64_t>(expected));
  CHECK(a.at_max->budget_bytes == budget);
  REQUIRE(a.one_more);
  CHECK(a.one_more->peak_bytes > budget);
  CHECK(a.limit == (1ull << 24));
  CHECK(a.stride == 1);
}

TEST_CASE("find_max micro-batch with the global batch kept: the largest dividing micro-batch that fits, tried one by one",
          "[max][allocator]") {
  // hf (the allocator replay's verdict, not monotone): 48 sequences per GPU a step. The oracle tries every
  // divisor of 48 from the top with the accumulation making up the rest.
  run_config run;
  run.profile = &profile_named("hf");
  run.precision = precision_regime::amp_bf16;  // hf has no bf16-mixed
  run.seq = 1024;
  run.micro_batch = 1;
  run.grad_accum = 48;
  max_question q = question(max_quantity::micro_batch, "gpt2", "a100-40gb", run);
  q.keep_global_batch = true;
  std::optional<std::uint64_t> expected, above;
  const std::vector<std::uint64_t> divisors = {48, 24, 16, 12, 8, 6, 4, 3, 2, 1};
  for (std::size_t i = 0; i < divisors.size() && !expected; ++i) {
    run_config r = run;
    r.micro_batch = divisors[i], r.grad_accum = 48 / divisors[i];
    const std::optional<config_summary> s = summarize_config(q.model, q.gpu, r, 0);
    if (s && s->fits) {
      expected = divisors[i];
      if (i > 0) above = divisors[i - 1];
    }
  }
  REQUIRE(expected);
  REQUIRE(above);  // 48 sequences of 1,024 do not fit a 40 GB A100 at once
  const max_answer a = find_max(q);
  CHECK(a.best == expected);
  CHECK(a.next == above);
  CHECK(a.run.micro_batch * a.run.grad_accum == 48);  // the global batch kept
}

TEST_CASE("find_max params: the derived shape of the answer, whose parameters are the value", "[max]") {
  run_config run;
  run.seq = 4096;
  run.recompute = recompute_mode::full;
  const max_question q = question(max_quantity::params, "tinyllama-1.1b", "h100", run, 0.05);
  const max_answer a = find_max(q);
  REQUIRE(a.best);
  const model_spec shape = derive_llama_shape(*a.best * 1'000'000ull);
  CHECK(a.model.spec.layers == shape.layers);
  CHECK(a.model.spec.hidden == shape.hidden);
  CHECK(a.value == count_params(shape).total);
  CHECK(a.limit == 10'000'000);
  CHECK(a.misses_below.empty());
  // The next target's shape does not fit the budget (bisection alone for a model's size).
  const model_spec bigger = derive_llama_shape((*a.best + 1) * 1'000'000ull);
  const std::optional<config_summary> s = summarize_config({bigger, describe_model(bigger)}, q.gpu, q.run, q.margin);
  REQUIRE(s);
  CHECK_FALSE(s->fits);
}

TEST_CASE("find_max: nothing fits, or the run cannot exist at all", "[max]") {
  // Llama-3.1-405B's weights alone pass an H100: nothing fits; the budget is 90% of the GPU with a 10% margin.
  run_config run;
  max_question q = question(max_quantity::seq, "llama-3.1-405b", "h100", run, 0.1);
  const max_answer a = find_max(q);
  CHECK_FALSE(a.best);
  CHECK(a.value == 0);
  CHECK_FALSE(a.at_max);
  CHECK(a.budget_bytes == static_cast<std::uint64_t>(std::floor(static_cast<double>(q.gpu.spec.memory_bytes) * 0.9)));
  // A V100 has no bf16: no sequence can run, an error in the options rather than "nothing fits".
  q = question(max_quantity::seq, "gpt2", "v100", run);
  q.run.precision = precision_regime::bf16;
  CHECK_THROWS_AS(find_max(q), input_error);
}

TEST_CASE("max_lever_ladder: each row's value is find_max's with the row's run; batch and seq are refused", "[max][levers]") {
  run_config run;
  run.seq = 1024;
  const max_question q = question(max_quantity::micro_batch, "gpt2", "l4", run);
  const std::vector<ladder_row> ladder = max_lever_ladder(q, lever_recompute, 8);
  REQUIRE(!ladder.empty());
  CHECK(ladder.front().changes.empty());  // the run as given first: it costs nothing and changes nothing
  for (const ladder_row& row : ladder) {
    max_question alone = q;
    alone.run = row.run;
    const max_answer a = find_max(alone);
    REQUIRE(a.best);
    CHECK(row.value == a.value);
    CHECK(row.peak_bytes == a.at_max->peak_bytes);
  }
  for (std::size_t i = 1; i < ladder.size(); ++i) CHECK(ladder[i].value > ladder[i - 1].value);
  CHECK_THROWS_AS(max_lever_ladder(q, lever_batch, 8), input_error);
  CHECK_THROWS_AS(max_lever_ladder(q, lever_seq, 8), input_error);
  CHECK(max_lever_ladder(q, lever_recompute, 1).size() == 1);
}
