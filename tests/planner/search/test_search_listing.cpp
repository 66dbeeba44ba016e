// What plan search lists beside its ranking (planner/search/search_listing.hpp), on hand-made results.
#include <catch2/catch.hpp>

#include "planner/model/model_facts.hpp"
#include "planner/search/search_listing.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using trainplan::test::data;

namespace {

config_summary summary(const sweep_model& m, const sweep_gpu& g, const run_config& run, double tokens_per_second,
                       std::uint64_t peak_bytes, std::uint64_t budget_bytes = 100,
                       tensor_category largest = tensor_category::activations) {
  config_summary s;
  s.model = &m;
  s.gpu = &g;
  s.run = run;
  s.tokens_per_second = tokens_per_second;
  s.peak_bytes = peak_bytes;
  s.budget_bytes = budget_bytes;
  s.fits = peak_bytes <= budget_bytes;
  s.largest = largest;
  return s;
}

}  // namespace

TEST_CASE("best_per_change_set: the fastest of each set of changes, kept only when it beats what it adds to", "[search][levers]") {
  const model_spec& gpt2 = data().model("gpt2").spec;
  const model_spec& medium = data().model("gpt2-medium").spec;
  const sweep_model m{gpt2, describe_model(gpt2)}, m2{medium, describe_model(medium)};
  const gpu_spec& h100 = data().gpu("h100");
  const sweep_gpu g{h100, data().calibration_for(h100)};
  run_config base;
  base.seq = 1024;
  run_config recompute = base, pure = base, both = base, split = base;
  recompute.recompute = recompute_mode::full;
  pure.precision = precision_regime::bf16;
  both.precision = precision_regime::bf16, both.recompute = recompute_mode::full;
  split.micro_batch = 2;  // the batch split alone: no change the listing names
  search_result r;
  // Fastest first, as search_configs sorts them. By hand:
  //   (as given), gpt2: `split` (105 tokens/s) is the fastest with no change named, ahead of the run as given (100)
  //   (as given), gpt2-medium: its own set (another model)
  //   --recompute full: 90 tokens/s, 40 bytes: adds to (as given) and is slower than `split`: dropped
  //   --precision bf16: 120 tokens/s, 45 bytes: beats `split` (105, 60) on both: listed, after the cost-free sets
  //   --precision bf16 --recompute full: 110, 35: adds to --precision bf16 and is slower: dropped
  r.fitting = {summary(m, g, pure, 120, 45), summary(m, g, both, 110, 35), summary(m, g, split, 105, 60),
               summary(m, g, base, 100, 50), summary(m, g, recompute, 90, 40), summary(m2, g, base, 10, 5)};
  const std::vector<listed_config> sets = best_per_change_set(r, base);
  REQUIRE(sets.size() == 3);
  CHECK(sets[0].summary == &r.fitting[2]);  // split
  CHECK(sets[0].changes.empty());
  CHECK(sets[0].costs == cost_none);
  CHECK(sets[1].summary == &r.fitting[5]);  // gpt2-medium as given
  CHECK(sets[2].summary == &r.fitting[0]);  // pure bf16
  REQUIRE(sets[2].changes.size() == 1);
  CHECK(sets[2].changes[0].find("--precision") == 0);
  CHECK(sets[2].costs == cost_numerics);

  const search_listing with = list_search(r, 2, &base);
  REQUIRE(with.best.size() == 2);
  CHECK(with.best[0].summary == &r.fitting[0]);
  CHECK(with.best[1].summary == &r.fitting[1]);
  CHECK(with.best[1].changes.size() == 2);
  CHECK(with.by_change_set.size() == 3);
  const search_listing without = list_search(r, 10, nullptr);
  CHECK(without.best.size() == 6);
  CHECK(without.best[0].changes.empty());
  CHECK(without.by_change_set.empty());
}

TEST_CASE("the failing runs by their largest component, and the one closest to its budget", "[search]") {
  const model_spec& gpt2 = data().model("gpt2").spec;
  const sweep_model m{gpt2, describe_model(gpt2)};
  const gpu_spec& h100 = data().gpu("h100");
  const sweep_gpu g{h100, data().calibration_for(h100)};
  run_config run;
  run.seq = 1024;
  search_result r;
  // Two over the budget by activations (90 of 80 and 85 of 80 bytes), one by weights (200 of 80), and one by
  // logits whose budget is larger (95 of 90): the closest relative to its budget (1.056, against 1.0625).
  r.failing = {summary(m, g, run, 1, 90, 80), summary(m, g, run, 1, 200, 80, tensor_category::weights),
               summary(m, g, run, 1, 85, 80), summary(m, g, run, 1, 95, 90, tensor_category::logits)};
  const search_listing l = list_search(r, 5, nullptr);
  REQUIRE(l.failing.size() == 3);  // by name: activations, logits, weights
  CHECK(l.failing[0].component == "activations");
  CHECK(l.failing[0].count == 2);
  CHECK(l.failing[0].closest == &r.failing[2]);  // 85 bytes, the smaller peak
  CHECK(l.failing[1].component == "logits");
  CHECK(l.failing[1].count == 1);
  CHECK(l.failing[2].component == "weights");
  CHECK(l.failing[2].closest == &r.failing[1]);
  const std::optional<closest_failing> closest = ways_out_of_closest(r);
  REQUIRE(closest);
  CHECK(closest->summary == &r.failing[3]);
  CHECK_FALSE(ways_out_of_closest(search_result{}));
}
