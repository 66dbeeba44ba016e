// A sweep evaluated on worker threads (planner/search/sweep_runner.hpp): every point once, in index order,
// the same results as one thread evaluating them one by one.
#include <catch2/catch.hpp>

#include <mutex>
#include <vector>

#include "planner/model/model_facts.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/search/sweep_runner.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using trainplan::test::data;

TEST_CASE("run_sweep_blocks hands back every point once, blocks in index order, as evaluated alone", "[sweep]") {
  sweep_space space;
  const model_spec& gpt2 = data().model("gpt2").spec;
  space.models.push_back({gpt2, describe_model(gpt2)});
  const gpu_spec& h100 = data().gpu("h100");
  space.gpus.push_back({h100, data().calibration_for(h100)});
  space.base.profile = &profile_named("hf");  // replayed: blocks of 16 points, so 100 points take 3 rounds of 3 workers
  space.precisions = {precision_regime::amp_bf16};  // hf's autocast (it has no bf16-mixed)
  space.seqs = {128, 256, 512, 1024, 2048};  // 2,048 is past GPT-2's learned positions: cannot run
  space.micro_batches = {1, 2, 4, 8, 16};
  space.grad_accums = {1, 2, 3, 4};
  const std::uint64_t total = space.size();
  REQUIRE(total == 100);

  std::vector<std::vector<sweep_result>> pending(3);
  std::vector<sweep_result> in_order;
  std::vector<sweep_block> blocks;
  run_sweep_blocks(
      space, 3, true, [&](unsigned worker, const sweep_result& r) { pending[worker].push_back(r); },
      [&](unsigned worker, const sweep_block& b) {
        CHECK(pending[worker].size() == b.last - b.first);
        in_order.insert(in_order.end(), pending[worker].begin(), pending[worker].end());
        pending[worker].clear();
        blocks.push_back(b);
      });
  REQUIRE(in_order.size() == total);
  REQUIRE(!blocks.empty());
  CHECK(blocks.size() > 3);  // more than one round
  CHECK(blocks.front().first == 0);
  CHECK(blocks.back().last == total);
  std::uint64_t fitting = 0, invalid = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (i > 0) CHECK(blocks[i].first == blocks[i - 1].last);
    fitting += blocks[i].fitting, invalid += blocks[i].invalid;
  }
  // The oracle: each point evaluated alone, in order, on this thread.
  std::uint64_t fitting_alone = 0, invalid_alone = 0;
  for (std::uint64_t k = 0; k < total; ++k) {
    const sweep_result alone = evaluate_point(space.at(k), nullptr, true);
    const sweep_result& got = in_order[k];
    CHECK(got.point.run == alone.point.run);
    REQUIRE(got.plan.has_value() == alone.plan.has_value());
    if (alone.plan) {
      CHECK(got.plan->peak_bytes == alone.plan->peak_bytes);
      CHECK(got.plan->fits == alone.plan->fits);
      fitting_alone += alone.plan->fits;
    } else {
      CHECK(got.error == alone.error);
      ++invalid_alone;
    }
  }
  CHECK(fitting == fitting_alone);
  CHECK(invalid == invalid_alone);
  CHECK(invalid == 20);  // the 20 points of seq 2,048
  CHECK(sweep_workers(5) == 5);
  CHECK(sweep_workers(0) >= 1);
}
