#include <catch2/catch.hpp>

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "planner/model/model_facts.hpp"
#include "planner/util/input_error.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/search/max_fit.hpp"
#include "planner/search/search.hpp"
#include "planner/search/search_listing.hpp"
#include "planner/search/sweep.hpp"
#include "planner/util/sweep_axis.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using namespace trainplan::test;

TEST_CASE("axis values: lists, +N and xN ranges, suffixes, inclusive stop", "[sweep][parse]") {
  using v = std::vector<std::uint64_t>;
  CHECK(parse_count_axis("1,2,4,8", "--micro-batch") == v{1, 2, 4, 8});
  CHECK(parse_count_axis("512:32k:x2", "--seq") == v{512, 1024, 2048, 4096, 8192, 16384, 32768});
  CHECK(parse_count_axis("1:5", "--grad-accum") == v{1, 2, 3, 4, 5});
  CHECK(parse_count_axis("10:20:+5", "--seq") == v{10, 15, 20});
  CHECK(parse_count_axis("10:22:5", "--seq") == v{10, 15, 20});  // a plain step adds; 22 is not reached
  CHECK(parse_count_axis("3:100:x3", "--seq") == v{3, 9, 27, 81});
  CHECK(parse_count_axis("7", "--seq") == v{7});
  CHECK(parse_count_axis("1, 2:4", "--seq") == v{1, 2, 3, 4});
  CHECK(parse_count_axis("1B:3B:+1B", "--params", true) == v{1'000'000'000, 2'000'000'000, 3'000'000'000});
  CHECK(parse_name_axis("h100, a100-80gb", "--gpu") == std::vector<std::string>{"h100", "a100-80gb"});
  CHECK(parse_probability_axis("0,0.1", "--dropout") == std::vector<double>{0.0, 0.1});
}

TEST_CASE("axis values: bad input names the option", "[sweep][parse]") {
  for (const char* bad : {"", " ", "1,,2", "1,", ",1", "8:4", "1:8:+0", "1:8:x1", "1:8:x0", "a:b", "1:8:y2", "1:2:3:4",
                          "abc", "-1", "1:8:x", "0"}) {
    INFO("'" << bad << "'");
    CHECK_THROWS_AS(parse_count_axis(bad, "--seq"), input_error);
  }
  CHECK_THROWS_WITH(parse_count_axis("8:4", "--seq"), Catch::Contains("--seq") && Catch::Contains("reversed"));
  CHECK_THROWS_WITH(parse_count_axis("1:8:+0", "--seq"), Catch::Contains("never advances"));
  CHECK_THROWS_WITH(parse_count_axis("1:100000000", "--seq"), Catch::Contains("more than"));
  CHECK_THROWS_AS(parse_name_axis("h100,,a100", "--gpu"), input_error);
  CHECK_THROWS_AS(parse_probability_axis("0.1,1.2", "--dropout"), input_error);
}

namespace {

sweep_space small_space() {
  sweep_space s;
  for (const char* name : {"gpt2", "tinyllama-1.1b"}) {
    const model_spec& m = data().model(name).spec;
    s.models.push_back({m, describe_model(m)});
  }
  for (const char* name : {"h100", "a100-40gb"}) s.gpus.push_back({data().gpu(name), data().calibration_for(data().gpu(name))});
  s.recomputes = {recompute_mode::none, recompute_mode::selective, recompute_mode::full};
  s.seqs = {256, 512, 1024};
  s.micro_batches = {1, 2, 4, 8};
  return s;
}

// GPT-2 on an H100 under the default profile (which replays the allocator), for the searches below to vary.
sweep_space gpt2_h100_space() {
  sweep_space s;
  const model_spec& m = data().model("gpt2").spec;
  s.models.push_back({m, describe_model(m)});
  const gpu_spec& h100 = data().gpu("h100");
  s.gpus.push_back({h100, data().calibration_for(h100)});
  s.base.profile = &default_cli_profile();
  return s;
}

}  // namespace

TEST_CASE("the sweep visits every combination exactly once, innermost axis fastest", "[sweep]") {
  const sweep_space s = small_space();
  REQUIRE(s.size() == 2 * 2 * 3 * 3 * 4);
  std::set<std::tuple<std::string, std::string, int, std::uint64_t, std::uint64_t>> seen;
  for (std::uint64_t k = 0; k < s.size(); ++k) {
    const sweep_space::point p = s.at(k);
    seen.emplace(p.model->spec.name, p.gpu->spec.name, static_cast<int>(p.run.recompute), p.run.seq, p.run.micro_batch);
  }
  CHECK(seen.size() == s.size());
  CHECK(s.at(0).run.micro_batch == 1);
  CHECK(s.at(1).run.micro_batch == 2);  // micro-batch is innermost
  CHECK(s.at(4).run.seq == 512);
  CHECK(s.at(s.size() - 1).model->spec.name == "tinyllama-1.1b");  // model is outermost
}

TEST_CASE("a global batch axis sets the accumulation, or marks the point impossible", "[sweep]") {
  sweep_space s = small_space();
  s.global_batches = {8, 12};
  s.micro_batches = {4, 8};
  const sweep_space::point a = s.at(0);  // micro-batch 4, global 8
  CHECK(a.run.grad_accum == 2);
  CHECK(a.error.empty());
  const sweep_space::point b = s.at(3);  // micro-batch 8, global 12
  CHECK(b.run.micro_batch == 8);
  CHECK_FALSE(b.error.empty());
  CHECK_FALSE(evaluate_point(b).plan.has_value());
  sweep_space huge = small_space();
  huge.seqs.assign(1u << 20, 512);
  huge.micro_batches.assign(1u << 20, 1);
  huge.grad_accums.assign(1u << 20, 1);
  huge.optimizers.assign(1u << 12, optimizer_kind::adamw);
  CHECK_THROWS_WITH(huge.size(), Catch::Contains("64 bits"));
}

TEST_CASE("search ranks fitting runs by tokens/s and finds the known best", "[search]") {
  // gpt2 at 1024 tokens with eager attention on an A100 40GB with a 64k-token batch: recompute none fits
  // at small micro-batches, and recomputation only adds FLOPs, so the best must be recompute none; ties
  // on speed go to the larger micro-batch.
  sweep_space s;
  const model_spec& m = data().model("gpt2").spec;
  s.models.push_back({m, describe_model(m)});
  s.gpus.push_back({data().gpu("a100-40gb"), data().calibration_for(data().gpu("a100-40gb"))});
  s.recomputes = {recompute_mode::full, recompute_mode::selective, recompute_mode::none};
  s.attentions = {attention_kind::eager};
  s.seqs = {1024};
  s.micro_batches = {1, 2, 4, 8, 16, 32, 64, 128};
  const search_result r = search_configs(s, 65536, 0.05);
  REQUIRE_FALSE(r.fitting.empty());
  const config_summary& best = r.fitting.front();
  CHECK(best.run.recompute == recompute_mode::none);
  CHECK(best.run.micro_batch * best.run.grad_accum * best.run.seq == 65536);
  for (const config_summary& c : r.fitting) {
    CHECK(c.peak_bytes <= c.budget_bytes);
    CHECK(c.tokens_per_second <= best.tokens_per_second);
    if (c.run.recompute == recompute_mode::none && c.tokens_per_second == best.tokens_per_second)
      CHECK(c.run.micro_batch <= best.run.micro_batch);
  }
  // Micro-batch 64 x 1024 tokens of gpt2 needs far more than 40 GB of logits and activations.
  CHECK(std::any_of(r.failing.begin(), r.failing.end(), [](const config_summary& c) { return c.run.micro_batch == 64; }));
  for (const config_summary& c : r.failing) CHECK(c.peak_bytes > c.budget_bytes);
  // Pareto front: nothing fitting dominates a front member, and peaks rise while speed rises.
  for (const config_summary& p : r.pareto)
    for (const config_summary& c : r.fitting) CHECK_FALSE(dominates(c, p));
  for (std::size_t i = 1; i < r.pareto.size(); ++i) {
    CHECK(r.pareto[i].peak_bytes >= r.pareto[i - 1].peak_bytes);
    CHECK(r.pareto[i].tokens_per_second > r.pareto[i - 1].tokens_per_second);
  }
  CHECK(r.evaluated == 3 * 7);  // micro-batch 128 x 1024 exceeds the 64k target
  CHECK(r.unreachable == 3);
}

TEST_CASE("largest_fitting finds the boundary of a monotone predicate", "[max]") {
  for (std::uint64_t boundary : {1ull, 2ull, 7ull, 1000ull, 999999ull, 1000000ull}) {
    const auto v = largest_fitting(1, 1000000, [&](std::uint64_t x) { return x <= boundary; });
    REQUIRE(v);
    CHECK(*v == boundary);
  }
  CHECK_FALSE(largest_fitting(1, 100, [](std::uint64_t) { return false; }));
}

TEST_CASE("refine_largest_fitting finds a later boundary above and names the grid values below that fail", "[max]") {
  // A verdict that is not monotone: fits up to 1,000 except 700 and 900-940, and again at 1,100-1,130; the
  // tensors alone exceed the budget from 1,200.
  auto verdict = [](std::uint64_t v) {
    if (v >= 1200) return fit_probe::beyond;
    const bool fits = (v <= 1000 && v != 700 && !(v >= 900 && v <= 940)) || (v >= 1100 && v <= 1130);
    return fits ? fit_probe::fits : fit_probe::fails;
  };
  std::uint64_t probes = 0;
  auto counted = [&](std::uint64_t v) { ++probes; return verdict(v); };
  // On a grid of 64 from the bisection's boundary at 1,000: 1,024, 1,088 and 1,152 fail and 1,216 is beyond,
  // so 1,000 stands; below, 960, 896, ... fit (700 is off the grid): nothing to name.
  refined_fit r = refine_largest_fitting(1000, 1 << 20, 64, counted);
  CHECK(r.best == 1000);
  CHECK(r.misses_below.empty());
  // On a grid of 10: 1,100 fits, then 1,101-1,130 fit and 1,131-1,139 do not: the answer is 1,130. Below it
  // the grid names 1,010-1,090 and 900-940, and stops after 16 fits in a row (890 down to 740: 700 unseen).
  r = refine_largest_fitting(1000, 1 << 20, 10, counted);
  CHECK(r.best == 1130);
  CHECK(r.misses_below == std::vector<std::uint64_t>{900, 910, 920, 930, 940, 1010, 1020, 1030, 1040, 1050, 1060, 1070, 1080, 1090});
  // The two looks alone (a ladder row of plan max --levers climbs without naming what fails below).
  CHECK(climb_largest_fitting(1000, 1 << 20, 10, verdict) == 1130);
  CHECK(climb_largest_fitting(1000, 1 << 20, 64, verdict) == 1000);
  CHECK(grid_misses_below(1130, 10, verdict) == r.misses_below);
  // Every value: micro-batches (no stride) from a boundary of 5 in a verdict with holes at 2 and 4.
  auto holes = [](std::uint64_t v) { return v == 2 || v == 4 || v > 5 ? (v > 6 ? fit_probe::beyond : fit_probe::fails) : fit_probe::fits; };
  r = refine_largest_fitting(5, 100, 1, holes);
  CHECK(r.best == 5);
  CHECK(r.misses_below == std::vector<std::uint64_t>{2, 4});
  // Never past hi, never below 1, and a bounded number of probes on a verdict that fits everywhere.
  probes = 0;
  r = refine_largest_fitting(1, 3, 1, [&](std::uint64_t v) { ++probes; CHECK(v >= 1); CHECK(v <= 3); return fit_probe::fits; });
  CHECK(r.best == 3);
  probes = 0;
  r = refine_largest_fitting(1ull << 40, ~0ull, 64, [&](std::uint64_t) { ++probes; return fit_probe::fits; });
  CHECK(probes <= 256 + 63 + 256);
}

TEST_CASE("largest_fitting_candidate probes candidates from the top, and divisors_up_to lists them", "[max]") {
  CHECK(divisors_up_to(64, 1 << 24) == std::vector<std::uint64_t>{1, 2, 4, 8, 16, 32, 64});
  CHECK(divisors_up_to(60, 10) == std::vector<std::uint64_t>{1, 2, 3, 4, 5, 6, 10});
  CHECK(divisors_up_to(1, 5) == std::vector<std::uint64_t>{1});
  CHECK(divisors_up_to(97, 1000) == std::vector<std::uint64_t>{1, 97});
  CHECK(divisors_up_to(~0ull, 16) == std::vector<std::uint64_t>{1, 3, 5, 15});  // 2^64 - 1 = 3 x 5 x 17 x ...
  // Not monotone: 12 fits, 6 and 3 do not, 1, 2 and 4 do; 24 and 48 are beyond.
  auto verdict = [](std::uint64_t v) {
    if (v > 12) return fit_probe::beyond;
    return v == 6 || v == 3 ? fit_probe::fails : fit_probe::fits;
  };
  const std::vector<std::uint64_t> d = divisors_up_to(48, 1 << 24);
  candidate_fit f = largest_fitting_candidate(d, verdict, true);
  REQUIRE(f.best);
  CHECK(*f.best == 12);
  CHECK(f.next == 16);
  CHECK(f.misses_below == std::vector<std::uint64_t>{3, 6});
  f = largest_fitting_candidate(d, verdict, false);
  CHECK(f.misses_below.empty());
  f = largest_fitting_candidate(d, [](std::uint64_t) { return fit_probe::fails; }, true);
  CHECK_FALSE(f.best);
  CHECK_FALSE(f.next);
  f = largest_fitting_candidate(d, [](std::uint64_t) { return fit_probe::fits; }, true);
  CHECK(f.best == 48);
  CHECK_FALSE(f.next);  // the largest candidate has none above it
}

TEST_CASE("search splits the target batch across data-parallel GPUs too", "[search]") {
  sweep_space s;
  const model_spec& m = data().model("gpt2").spec;
  s.models.push_back({m, describe_model(m)});
  s.gpus.push_back({data().gpu("h100"), data().calibration_for(data().gpu("h100"))});
  s.base.gpus = 8;
  s.seqs = {1024};
  s.micro_batches = {2};
  const search_result r = search_configs(s, 1u << 20, 0.05);
  REQUIRE(r.fitting.size() == 1);
  const run_config& run = r.fitting.front().run;
  CHECK(run.seq * run.micro_batch * run.grad_accum * run.data_parallel() == (1u << 20));
  CHECK(run.grad_accum == 64);
}

TEST_CASE("search counts every configuration that cannot run as invalid, and ranks none of them", "[search]") {
  // Regression (issue 12, scripts/test.sh --sanitize): from the second invalid configuration on, the search
  // read the verdict of an empty optional and ranked an uninitialised summary (UBSan: a bool of value 232).
  sweep_space s;
  const model_spec& m = data().model("gpt2").spec;
  s.models.push_back({m, describe_model(m)});
  s.gpus.push_back({data().gpu("h100"), data().calibration_for(data().gpu("h100"))});
  s.base.gpus = 5;
  s.base.pp = 5;  // 5 stages do not divide gpt2's 12 layers: every configuration is invalid
  s.seqs = {1024};
  s.micro_batches = {1, 2, 4};
  const search_result r = search_configs(s, 4096, 0.05);
  CHECK(r.evaluated == 3);
  CHECK(r.invalid == 3);
  CHECK(r.fitting.empty());
  CHECK(r.failing.empty());
  CHECK(r.pareto.empty());
  CHECK_FALSE(r.first_invalid_reason.empty());
}

TEST_CASE("a sweep that reuses inventories between points gets exactly what evaluating each point alone gets",
          "[sweep][reuse]") {
  sweep_space s = small_space();
  s.grad_accums = {1, 2, 8};
  s.precisions = {precision_regime::bf16_mixed, precision_regime::fp32};
  // The innermost order (accumulation fastest) reuses nine points in ten; the reversed order changes the
  // key at almost every point, so the reuse is rebuilt and must not carry anything stale across.
  plan_reuse forward_reuse, backward_reuse;
  const std::uint64_t n = s.size();
  std::uint64_t compared = 0;
  for (std::uint64_t k = 0; k < n; ++k) {
    for (const auto& [index, reuse] : {std::pair{k, &forward_reuse}, std::pair{n - 1 - k, &backward_reuse}}) {
      const sweep_space::point p = s.at(index);
      const sweep_result alone = evaluate_point(p);
      const sweep_result shared = evaluate_point(p, reuse);
      INFO(p.model->spec.name << " seq " << p.run.seq << " mb " << p.run.micro_batch << " accum " << p.run.grad_accum);
      REQUIRE(alone.plan.has_value() == shared.plan.has_value());
      if (!alone.plan) continue;
      CHECK(shared.plan->tensor_peak_bytes == alone.plan->tensor_peak_bytes);
      CHECK(shared.plan->peak_bytes == alone.plan->peak_bytes);
      CHECK(shared.plan->fits == alone.plan->fits);
      CHECK(shared.plan->inv.tensors.size() == alone.plan->inv.tensors.size());
      CHECK(shared.plan->ops.ops.size() == alone.plan->ops.ops.size());
      CHECK(shared.plan->time.step_seconds == alone.plan->time.step_seconds);  // the same arithmetic, bit for bit
      CHECK(shared.plan->time.hfu == alone.plan->time.hfu);
      ++compared;
    }
  }
  CHECK(compared == 2 * n);
  CHECK(forward_reuse.model == &s.models.back().spec);
}

TEST_CASE("a sweep's allocator replays reused across accumulations and GPUs are exactly the ones each point replays alone",
          "[sweep][reuse][allocator]") {
  // plan_reuse::replays: accumulations 3 and up share a schedule, two GPUs share the inventory but not the
  // budget; rows that fit, rows that need the bisection, and expandable segments.
  sweep_space s;
  const model_spec& m = data().model("gpt2").spec;
  s.models.push_back({m, describe_model(m)});
  for (const char* name : {"h100", "l40s"}) s.gpus.push_back({data().gpu(name), data().calibration_for(data().gpu(name))});
  s.base.profile = &profile_named("hf");
  s.precisions = {precision_regime::amp_bf16};
  s.seqs = {1024};
  s.micro_batches = {8, 120};
  s.grad_accums = {1, 2, 3, 4, 7};
  s.expandable_segments = {false, true};
  plan_reuse reuse;
  std::uint64_t replayed = 0, failing = 0;
  for (std::uint64_t k = 0; k < s.size(); ++k) {
    const sweep_space::point p = s.at(k);
    const sweep_result alone = evaluate_point(p, nullptr, true);
    const sweep_result shared = evaluate_point(p, &reuse, true);
    INFO(p.gpu->spec.name << " mb " << p.run.micro_batch << " accum " << p.run.grad_accum << " expandable " << p.run.expandable_segments);
    REQUIRE(alone.plan.has_value());
    REQUIRE(shared.plan.has_value());
    REQUIRE(alone.plan->allocator.has_value());
    REQUIRE(shared.plan->allocator.has_value());
    CHECK(shared.plan->peak_bytes == alone.plan->peak_bytes);
    CHECK(shared.plan->fits == alone.plan->fits);
    CHECK(shared.plan->headroom_bytes == alone.plan->headroom_bytes);
    CHECK(shared.plan->allocator_reserved_bytes == alone.plan->allocator_reserved_bytes);
    CHECK(shared.plan->overhead.allocator_slack_bytes == alone.plan->overhead.allocator_slack_bytes);
    CHECK(shared.plan->allocator->peak_reserved_bytes == alone.plan->allocator->peak_reserved_bytes);
    CHECK(shared.plan->allocator->budget_reserved_bytes == alone.plan->allocator->budget_reserved_bytes);
    CHECK(shared.plan->allocator->segments_made == alone.plan->allocator->segments_made);
    CHECK(shared.plan->allocator->out_of_memory == alone.plan->allocator->out_of_memory);
    ++replayed;
    failing += !alone.plan->fits;
  }
  CHECK(replayed == s.size());
  CHECK(failing > 0);
  CHECK(failing < replayed);
  // One replay (with its bisection) per GPU, micro-batch, allocator and min(accumulation, 3): 24 of the 40 rows. The
  // reuse starts again when the run but its accumulation changes: the last row's holds three.
  CHECK(reuse.replays.size() == 3);
}

TEST_CASE("largest_proper_divisors: the largest smaller divisors, found in a millisecond for any count", "[max][levers]") {
  CHECK(largest_proper_divisors(64, 6) == std::vector<std::uint64_t>{32, 16, 8, 4, 2, 1});
  CHECK(largest_proper_divisors(12, 6) == std::vector<std::uint64_t>{6, 4, 3, 2, 1});
  CHECK(largest_proper_divisors(97, 6) == std::vector<std::uint64_t>{1});  // a prime: only 1
  CHECK(largest_proper_divisors(1, 6).empty());
  CHECK(largest_proper_divisors(1ull << 40, 3) == std::vector<std::uint64_t>{1ull << 39, 1ull << 38, 1ull << 37});
  // A prime near 2^61 (2^61 - 1): trial division stops at 2^20, and 1 is still offered.
  CHECK(largest_proper_divisors((1ull << 61) - 1, 6) == std::vector<std::uint64_t>{1});
}

TEST_CASE("search: each failing peak it lists is the fit check's, as if every failing run were replayed", "[search]") {
  // gpt2 at seq 1024 with micro-batches up to 256: many runs whose tensors alone pass the budget, their replay
  // left out until listed (search_result::failing). By brute force: every failing run replayed as plan does.
  sweep_space s;
  const model_spec& m = data().model("gpt2").spec;
  s.models.push_back({m, describe_model(m)});
  const gpu_spec& h100 = data().gpu("h100");
  s.gpus.push_back({h100, data().calibration_for(h100)});
  s.base.profile = &default_cli_profile();  // a stack whose allocator is replayed
  REQUIRE(replays_allocator(s.base));
  s.seqs = {1024};
  s.micro_batches = {8, 16, 32, 64, 128, 256, 512, 1024};
  s.precisions = {precision_regime::amp_bf16, precision_regime::fp32, precision_regime::bf16};
  s.recomputes = {recompute_mode::none, recompute_mode::full};
  s.expandable_segments = {false, true};
  const double margin = 0.05;
  const search_result r = search_configs(s, 1u << 20, margin);
  INFO(r.evaluated << " evaluated, " << r.fitting.size() << " fit, " << r.invalid << " invalid: " << r.first_invalid_reason);
  REQUIRE(r.failing.size() >= 10);
  std::uint64_t left_at_floor = 0;
  std::map<tensor_category, std::uint64_t> least;  // by largest component: the least replayed peak
  double least_ratio = 2e300;
  for (const config_summary& f : r.failing) {
    const std::optional<config_summary> full = summarize_config(*f.model, *f.gpu, f.run, margin, nullptr, replay_when::always);
    REQUIRE(full);
    CHECK_FALSE(full->fits);
    CHECK(f.peak_bytes <= full->peak_bytes);  // the peak, or its floor
    if (f.peak_is_floor) ++left_at_floor;
    else CHECK(f.peak_bytes == full->peak_bytes);
    auto [it, added] = least.insert({full->largest, full->peak_bytes});
    if (!added) it->second = std::min(it->second, full->peak_bytes);
    least_ratio = std::min(least_ratio, static_cast<double>(full->peak_bytes) / full->budget_bytes);
  }
  CHECK(left_at_floor > 0);  // the shortcut was taken
  const search_listing listing = list_search(r, 3, nullptr);
  REQUIRE(listing.failing.size() == least.size());
  for (const failing_component& c : listing.failing) {
    INFO(c.component);
    REQUIRE(c.closest);
    CHECK_FALSE(c.closest->peak_is_floor);
    CHECK(c.closest->peak_bytes == least.at(c.closest->largest));
    // and the fit check's peak of that run, on the whole GPU
    CHECK(evaluate_plan(m, c.closest->run, h100, data().calibration_for(h100)).peak_bytes == c.closest->peak_bytes);
  }
  const config_summary& closest = *std::min_element(r.failing.begin(), r.failing.end(), [](const config_summary& a, const config_summary& b) {
    return static_cast<double>(a.peak_bytes) / a.budget_bytes < static_cast<double>(b.peak_bytes) / b.budget_bytes;
  });
  CHECK_FALSE(closest.peak_is_floor);
  CHECK(static_cast<double>(closest.peak_bytes) / closest.budget_bytes == least_ratio);
}

TEST_CASE("search with replay programs shared between equal schedules, on three threads, lists exactly the rows it lists alone on one", "[search]") {
  // gpt2 along axes that leave the allocator's schedule alone (GPU counts under DDP: a whole replica on each) or
  // change it (precision, the optimizer's implementation, recomputation, expandable segments, micro-batch): many
  // configurations share a schedule.
  sweep_space s = gpt2_h100_space();
  REQUIRE(replays_allocator(s.base));
  s.seqs = {512};
  s.micro_batches = {4, 16, 64, 256};
  s.precisions = {precision_regime::amp_bf16, precision_regime::fp32};
  s.optimizer_impls = {optimizer_impl_kind::fused, optimizer_impl_kind::foreach_impl};
  s.recomputes = {recompute_mode::none, recompute_mode::full};
  s.expandable_segments = {false, true};
  s.layouts = {{1, 0, 1}, {2, 0, 1}, {4, 0, 1}, {8, 0, 1}};
  // Shared on three threads (each its own cache), alone on one: the same rows in the same order.
  const search_result shared = search_configs(s, 1u << 20, 0.05, true, 3);
  const search_result alone = search_configs(s, 1u << 20, 0.05, false, 1);
  INFO(s.size() << " configurations, " << shared.evaluated << " evaluated, " << shared.unreachable << " unreachable, " << shared.invalid
             << " invalid (" << shared.first_invalid_reason << "), " << shared.programs_shared << " programs shared");
  CHECK(shared.programs_shared > shared.evaluated / 4);
  CHECK(alone.programs_shared == 0);
  CHECK(shared.evaluated == alone.evaluated);
  CHECK(shared.invalid == alone.invalid);
  CHECK(shared.unreachable == alone.unreachable);
  auto same_rows = [](const std::vector<config_summary>& a, const std::vector<config_summary>& b) {
    REQUIRE(a.size() == b.size());
    for (std::size_t k = 0; k < a.size(); ++k) {
      INFO("row " << k);
      CHECK(a[k].run == b[k].run);
      CHECK(a[k].peak_bytes == b[k].peak_bytes);
      CHECK(a[k].floor_bytes == b[k].floor_bytes);
      CHECK(a[k].peak_is_floor == b[k].peak_is_floor);
      CHECK(a[k].fits == b[k].fits);
      CHECK(a[k].tokens_per_second == b[k].tokens_per_second);
      CHECK(a[k].overhead_bytes == b[k].overhead_bytes);
      CHECK(std::equal(std::begin(a[k].category_bytes), std::end(a[k].category_bytes), std::begin(b[k].category_bytes)));
    }
  };
  REQUIRE(shared.fitting.size() > 10);
  REQUIRE(shared.failing.size() > 10);
  same_rows(shared.fitting, alone.fitting);
  same_rows(shared.failing, alone.failing);
  same_rows(shared.pareto, alone.pareto);
}

TEST_CASE("a sweep space's digits are at()'s, and a search lists its rows in index order whatever order it evaluates them in", "[search]") {
  // The search evaluates the optimizer's axes innermost (programs that begin alike come together:
  // planner/search/search.cpp), then puts every result back at its index: its failing rows, unsorted, come in
  // index order, as a search that walked the index would list them.
  sweep_space s = gpt2_h100_space();
  s.precisions = {precision_regime::amp_bf16};
  s.seqs = {1024};
  s.micro_batches = {64, 256, 512};  // the larger two do not fit an H100
  s.optimizers = {optimizer_kind::adamw, optimizer_kind::lion, optimizer_kind::sgd_momentum};
  s.optimizer_impls = {optimizer_impl_kind::fused, optimizer_impl_kind::foreach_impl};
  s.recomputes = {recompute_mode::none, recompute_mode::full};
  // radices(): innermost first, their product the size, each digit the axis at() reads there.
  const auto radices = s.radices();
  std::uint64_t product = 1, stride = 1;
  for (std::size_t d = 0; d < sweep_space::digit_count; ++d) {
    product *= radices[d];
    if (d == sweep_space::micro_batch_digit) CHECK(s.at(stride).run.micro_batch == s.micro_batches[1]);
    if (d == sweep_space::recompute_digit) CHECK(s.at(stride).run.recompute == s.recomputes[1]);
    if (d == sweep_space::optimizer_impl_digit) CHECK(s.at(stride).run.optimizer_impl == s.optimizer_impls[1]);
    if (d == sweep_space::optimizer_digit) CHECK(s.at(stride).run.optimizer == s.optimizers[1]);
    stride *= radices[d];
  }
  CHECK(product == s.size());
  const search_result r = search_configs(s, 1u << 20, 0.05, true, 2);
  INFO(r.evaluated << " evaluated, " << r.fitting.size() << " fit, " << r.invalid << " invalid: " << r.first_invalid_reason);
  REQUIRE(r.failing.size() > 5);
  auto index_of = [&s](const run_config& run) {
    for (std::uint64_t k = 0; k < s.size(); ++k) {
      run_config at = s.at(k).run;
      at.grad_accum = run.grad_accum;  // the search's, from the target batch
      if (at == run) return k;
    }
    FAIL("a listed row that is no point of the space");
    return std::uint64_t{0};
  };
  for (std::size_t k = 1; k < r.failing.size(); ++k) CHECK(index_of(r.failing[k - 1].run) < index_of(r.failing[k].run));
}
