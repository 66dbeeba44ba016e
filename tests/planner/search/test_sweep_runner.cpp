// A sweep evaluated on worker threads (planner/search/sweep_runner.hpp): every point once, in index order,
// the same results as one thread evaluating them one by one.
#include <catch2/catch.hpp>

#include <mutex>
#include <utility>
#include <vector>

#include "planner/model/model_facts.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/search/sweep_runner.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using trainplan::test::data;

namespace {

// Each point of `in_order` against the same point evaluated alone on this thread (the oracle); returns how many
// of them fit and how many cannot run.
std::pair<std::uint64_t, std::uint64_t> check_against_alone(const sweep_space& space, const std::vector<sweep_result>& in_order) {
  std::uint64_t fitting = 0, invalid = 0;
  for (std::uint64_t k = 0; k < space.size(); ++k) {
    const sweep_result alone = evaluate_point(space.at(k), nullptr, true);
    const sweep_result& got = in_order[k];
    INFO("point " << k);
    CHECK(got.point.run == alone.point.run);
    CHECK(got.point.gpu == alone.point.gpu);
    CHECK(got.point.model == alone.point.model);
    REQUIRE(got.plan.has_value() == alone.plan.has_value());
    if (alone.plan) {
      CHECK(got.plan->peak_bytes == alone.plan->peak_bytes);
      CHECK(got.plan->fits == alone.plan->fits);
      CHECK(got.plan->allocator_reserved_bytes == alone.plan->allocator_reserved_bytes);
      fitting += alone.plan->fits;
    } else {
      CHECK(got.error == alone.error);
      ++invalid;
    }
  }
  return {fitting, invalid};
}

}  // namespace

TEST_CASE("run_sweep_blocks hands back every point once, blocks in index order, as evaluated alone", "[sweep]") {
  sweep_space space;
  const model_spec& gpt2 = data().model("gpt2").spec;
  space.models.push_back({gpt2, describe_model(gpt2)});
  const gpu_spec& h100 = data().gpu("h100");
  space.gpus.push_back({h100, data().calibration_for(h100)});
  space.base.profile = &profile_named("hf");  // replayed: blocks of 16 points, 13 units in rounds of 12 (3 workers)
  space.precisions = {precision_regime::amp_bf16};  // hf's autocast (it has no bf16-mixed)
  space.seqs = {128, 256, 512, 1024, 2048};  // 2,048 is past GPT-2's learned positions: cannot run
  space.micro_batches = {1, 2, 4, 8, 16};
  space.grad_accums = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::uint64_t total = space.size();
  REQUIRE(total == 200);

  const sweep_schedule schedule = schedule_sweep(space, 3, true);
  REQUIRE(schedule.parts == 1);  // one GPU: the space in index order
  REQUIRE(schedule.slots * schedule.block_points < total);  // more than one round
  std::vector<std::vector<sweep_result>> pending(schedule.slots);
  std::vector<sweep_result> in_order;
  std::vector<sweep_block> blocks;
  run_sweep_blocks(
      space, schedule, true,
      [&](unsigned slot, std::uint64_t part, const sweep_result& r) {
        CHECK(part == 0);
        pending[slot].push_back(r);
      },
      [&](unsigned slot, const sweep_block& b) {
        CHECK(pending[slot].size() == b.last - b.first);
        in_order.insert(in_order.end(), pending[slot].begin(), pending[slot].end());
        pending[slot].clear();
        blocks.push_back(b);
      });
  REQUIRE(in_order.size() == total);
  REQUIRE(blocks.size() == 13);
  CHECK(blocks.front().first == 0);
  CHECK(blocks.back().last == total);
  std::uint64_t fitting = 0, invalid = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (i > 0) CHECK(blocks[i].first == blocks[i - 1].last);
    fitting += blocks[i].fitting, invalid += blocks[i].invalid;
  }
  const auto [fitting_alone, invalid_alone] = check_against_alone(space, in_order);
  CHECK(fitting == fitting_alone);
  CHECK(invalid == invalid_alone);
  CHECK(invalid == 40);  // the 40 points of seq 2,048
  CHECK(sweep_workers(5) == 5);
  CHECK(sweep_workers(0) >= 1);
}

TEST_CASE("run_sweep_blocks evaluates a model's rows on every GPU side by side, each result as evaluated alone", "[sweep]") {
  // With the replay and several GPUs, a unit is the same rows on each GPU, which lie a GPU's share of the space
  // apart. Put back in index order as the sweep command does (part 0 written as it comes, the other parts kept
  // until their model's last block), every point must be there once, as evaluated alone.
  sweep_space space;
  for (const char* name : {"gpt2", "tinyllama-1.1b"}) {
    const model_spec& m = data().model(name).spec;
    space.models.push_back({m, describe_model(m)});
  }
  for (const char* name : {"h100", "a100-80gb", "l40s"}) {
    const gpu_spec& g = data().gpu(name);
    space.gpus.push_back({g, data().calibration_for(g)});
  }
  space.base.profile = &profile_named("hf");
  space.precisions = {precision_regime::amp_bf16};
  space.seqs = {512, 2048};
  space.micro_batches = {1, 8, 64};
  space.grad_accums = {1, 4, 5};
  const std::uint64_t total = space.size();
  REQUIRE(total == 108);

  const sweep_schedule schedule = schedule_sweep(space, 2, true);
  REQUIRE(schedule.parts == 3);
  REQUIRE(schedule.part_points == 18);
  std::vector<std::vector<std::vector<sweep_result>>> pending(schedule.slots, std::vector<std::vector<sweep_result>>(3));
  std::vector<std::vector<sweep_result>> kept(3);
  std::vector<sweep_result> in_order;
  std::uint64_t next_part0 = 0, fitting = 0, invalid = 0, blocks = 0;
  run_sweep_blocks(
      space, schedule, true,
      [&](unsigned slot, std::uint64_t part, const sweep_result& r) { pending[slot][part].push_back(r); },
      [&](unsigned slot, const sweep_block& b) {
        std::vector<sweep_result>& rows = pending[slot][b.part];
        REQUIRE(rows.size() == b.last - b.first);
        for (std::uint64_t k = b.first; k < b.last; ++k) CHECK(rows[k - b.first].point.gpu == space.at(k).gpu);
        if (b.part == 0) {
          CHECK(b.first == next_part0);  // part 0's blocks in index order
          in_order.insert(in_order.end(), rows.begin(), rows.end());
        } else {
          kept[b.part].insert(kept[b.part].end(), rows.begin(), rows.end());
        }
        next_part0 = b.part == 0 ? b.last : next_part0;
        rows.clear();
        fitting += b.fitting, invalid += b.invalid, ++blocks;
        if (b.part == 2 && b.last % schedule.part_points == 0) {
          next_part0 = b.last;  // the model's other parts come next in index order
          for (std::uint64_t p = 1; p < 3; ++p) {
            in_order.insert(in_order.end(), kept[p].begin(), kept[p].end());
            kept[p].clear();
          }
        }
      });
  REQUIRE(in_order.size() == total);
  CHECK(blocks == 2 * 2 * 3);  // 2 models x 2 units (18 rows in blocks of 16) x 3 GPUs
  const auto [fitting_alone, invalid_alone] = check_against_alone(space, in_order);
  CHECK(fitting == fitting_alone);
  CHECK(invalid == invalid_alone);
  CHECK(fitting > 0);
  CHECK(fitting < total);  // some rows fit one GPU and not another
}

TEST_CASE("a sweep keeps at most two million rows aside for its GPUs, else runs in index order", "[sweep]") {
  sweep_space space;
  const model_spec& gpt2 = data().model("gpt2").spec;
  space.models.push_back({gpt2, describe_model(gpt2)});
  for (const char* name : {"h100", "a100-80gb", "l40s"}) {
    const gpu_spec& g = data().gpu(name);
    space.gpus.push_back({g, data().calibration_for(g)});
  }
  space.base.profile = &profile_named("hf");
  space.seqs.assign(1000, 512);
  space.micro_batches.assign(1000, 1);  // a million rows on each GPU: two million kept aside
  CHECK(schedule_sweep(space, 2, true).parts == 3);
  space.micro_batches.push_back(1);  // a thousand more on each: past the bound
  const sweep_schedule past = schedule_sweep(space, 2, true);
  CHECK(past.parts == 1);
  CHECK(past.part_points == space.size());
  CHECK(schedule_sweep(space, 2, false).parts == 1);  // the estimate: no replay to share
}
