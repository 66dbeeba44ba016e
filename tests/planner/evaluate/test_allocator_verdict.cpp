// Under --framework hf the peak is the CUDA context plus what PyTorch's caching allocator reserves, replayed
// within the GPU's memory, and the verdict is the replay's (planner/evaluate/plan.hpp, apply_allocator_replay): the
// fit check, sweeps (unless --estimate), searches, max and the suggestions agree on it.
#include <catch2/catch.hpp>

#include <algorithm>

#include "planner/model/model_facts.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/allocator/allocator_trace.hpp"
#include "planner/allocator/program_cache.hpp"
#include "planner/allocator/replay_program.hpp"
#include "planner/search/max_fit.hpp"
#include "planner/search/search.hpp"
#include "planner/search/sweep.hpp"
#include "tests/support/measured_runs.hpp"
#include "tests/support/plan_helpers.hpp"

using namespace trainplan;

namespace {

// A catalog model and a run of it, for the tests that go over several.
struct case_run {
  const char* model;
  run_config run;
};

// The case's plan, its allocator replayed.
plan_result plan_with_replay(const case_run& c) {
  plan_result p = test::plan_of(test::data().model(c.model).spec, c.run);
  REQUIRE(p.allocator.has_value());
  return p;
}

run_config gpt2_run(std::uint64_t micro_batch, recompute_mode recompute = recompute_mode::none) {
  run_config r;
  r.profile = &profile_named("hf");
  r.precision = precision_regime::amp_bf16;
  r.seq = 1024;
  r.micro_batch = micro_batch;
  r.recompute = recompute;
  r.dropout = 0.1;  // GPT-2's own, as plan and a sweep take it from the model
  return r;
}

}  // namespace

TEST_CASE("hf: the peak is the context plus the replayed reserved bytes, for every shared H100 run", "[measured][allocator][hf]") {
  for (const measured_run& m : test::shared_h100_measurements().runs) {
    INFO(m.id);
    const plan_result p = test::plan_of(m.model, m.run);
    REQUIRE(p.allocator.has_value());
    CHECK(p.peak_bytes == p.overhead.cuda_context_bytes + p.allocator_reserved_bytes);
    CHECK(p.allocator_reserved_bytes == p.allocator->peak_reserved_bytes + p.overhead.cublas_workspace_bytes);
    CHECK(p.overhead.allocator_slack_bytes == p.allocator->peak_reserved_bytes - p.tensor_peak_bytes);
    CHECK(p.fits);
    CHECK(p.allocator->cache_releases == 0);  // a few GiB on an 80 GB GPU: never short
    CHECK(p.allocator->budget_reserved_bytes == p.allocator->peak_reserved_bytes);
  }
}

TEST_CASE("hf: a run whose tensors fit but whose allocator runs out does not fit", "[allocator][hf]") {
  // GPT-2, amp-bf16, dropout 0.1, s1024 b48: tensors 70.4 GiB, the fast estimate (2% slack) says it fits; the replay
  // runs out of memory in the second step's loss, its [b*s, V] fp32 buffers finding no segment whole.
  const model_spec& gpt2 = test::data().model("gpt2").spec;
  const gpu_spec& h100 = test::data().gpu("h100");
  plan_options estimate_only;
  estimate_only.detail = timeline_detail::peak;
  const plan_result estimate = evaluate_plan(gpt2, gpt2_run(48), h100, test::data().calibration_for(h100), estimate_only);
  CHECK(estimate.fits);
  CHECK_FALSE(estimate.allocator.has_value());
  const plan_result p = test::plan_of(gpt2, gpt2_run(48));
  REQUIRE(p.allocator.has_value());
  CHECK(p.allocator->out_of_memory);
  CHECK(p.allocator->failed_step >= 1);
  CHECK(std::string(p.allocator->failed_tensor).starts_with("loss."));
  CHECK_FALSE(p.fits);
  CHECK(p.peak_bytes > h100.memory_bytes);
  CHECK(p.allocator->peak_allocated_bytes + p.overhead.cuda_context_bytes + p.overhead.cublas_workspace_bytes <=
        h100.memory_bytes);  // the tensors alone fit: fragmentation
}

TEST_CASE("hf: a run that runs out of memory reports what it reserved and made up to the error", "[allocator][hf]") {
  // PyTorch raises its out-of-memory error at the first allocation the allocator cannot serve, and the step ends
  // there: what it reserved cannot pass the memory it was given, and the segments it made are those before the
  // error (a replay carried on past it, with no limit, once reported 445 GB reserved on an 80 GB GPU). The
  // tensors' peak is the whole run's, as the replay with no limit places them.
  run_config llama = gpt2_run(4);
  llama.seq = 8192;
  llama.dropout = 0;
  const case_run cases[] = {{"gpt2", gpt2_run(48)}, {"llama-3.1-8b", llama}};
  for (const case_run& c : cases) {
    INFO(c.model);
    const model_facts facts = describe_model(test::data().model(c.model).spec);
    const plan_result p = plan_with_replay(c);
    REQUIRE(p.allocator->out_of_memory);
    const std::uint64_t capacity = test::data().gpu("h100").memory_bytes - p.overhead.fixed_bytes();
    // The reference allocator (caching_allocator, op by op) records each segment it makes up to the error, and
    // none for the allocation that failed: the reported figures are its count and the most reserved after one.
    const allocator_schedule schedule = plan_allocator_schedule(p, facts);
    std::vector<allocator_growth> growth;
    const allocator_replay until_error = replay_schedule_reference(schedule, &growth, capacity, true);
    REQUIRE(until_error.out_of_memory);
    CHECK(p.allocator->cache_releases == until_error.cache_releases);
    CHECK(p.allocator->segments_made == growth.size());
    std::uint64_t most_reserved = 0;
    for (const allocator_growth& g : growth) most_reserved = std::max(most_reserved, g.reserved_bytes);
    // What the device gave (its capacity holds both cuBLAS workspaces), and the peak reported without the
    // workspaces made by then: both, or only the forward's where it fails before the first backward.
    const std::uint64_t workspace = schedule.workspace_bytes;
    CHECK(most_reserved <= capacity + 2 * workspace);
    CHECK(p.allocator->budget_reserved_bytes <= most_reserved);
    const std::uint64_t left_out = most_reserved - p.allocator->budget_reserved_bytes;
    CHECK((left_out == workspace || left_out == 2 * workspace));
    if (until_error.failed_step >= 1) CHECK(left_out == 2 * workspace);
    const allocator_replay with_no_limit = replay_schedule(schedule);
    CHECK(p.allocator->peak_allocated_bytes == with_no_limit.peak_allocated_bytes);
    CHECK(p.allocator->tensors_fit == (with_no_limit.peak_allocated_bytes <= capacity));
  }
}

TEST_CASE("hf: plan max micro-batch, searches and sweeps give the fit check's verdict and peak", "[allocator][hf]") {
  const sweep_model gpt2{test::data().model("gpt2").spec, describe_model(test::data().model("gpt2").spec)};
  const gpu_spec& h100 = test::data().gpu("h100");
  const sweep_gpu gpu{h100, test::data().calibration_for(h100)};
  auto fit_check = [&](std::uint64_t b) { return test::plan_of(gpt2.spec, gpt2_run(b)); };
  const std::optional<std::uint64_t> largest = largest_fitting(1, 256, [&](std::uint64_t b) {
    const std::optional<config_summary> s = summarize_config(gpt2, gpu, gpt2_run(b), 0.0);
    return s && s->fits;
  });
  REQUIRE(largest.has_value());
  CHECK(fit_check(*largest).fits);
  CHECK_FALSE(fit_check(*largest + 1).fits);
  for (std::uint64_t b : {*largest, *largest + 1, std::uint64_t{4}}) {
    INFO("micro-batch " << b);
    const plan_result p = fit_check(b);
    const std::optional<config_summary> s = summarize_config(gpt2, gpu, gpt2_run(b), 0.0);
    REQUIRE(s.has_value());
    CHECK(s->fits == p.fits);
    CHECK(s->peak_bytes == p.peak_bytes);
    sweep_space space;
    space.models.push_back(gpt2);
    space.gpus.push_back(gpu);
    space.precisions = {precision_regime::amp_bf16};
    space.seqs = {1024};
    space.micro_batches = {b};
    space.base.profile = &profile_named("hf");
    const sweep_result replayed = evaluate_point(space.at(0), nullptr, true);
    REQUIRE(replayed.plan.has_value());
    CHECK(replayed.plan->fits == p.fits);
    CHECK(replayed.plan->peak_bytes == p.peak_bytes);
    const sweep_result estimated = evaluate_point(space.at(0), nullptr, false);  // plan sweep --estimate
    REQUIRE(estimated.plan.has_value());
    CHECK_FALSE(estimated.plan->allocator.has_value());
    CHECK(estimated.plan->peak_bytes == estimated.plan->tensor_peak_bytes + estimated.plan->overhead.total());
  }
}

TEST_CASE("hf: a sweep row whose tensors alone do not fit has plan's peak, the least memory its replay needs", "[allocator][hf]") {
  const sweep_model gpt2{test::data().model("gpt2").spec, describe_model(test::data().model("gpt2").spec)};
  const gpu_spec& h100 = test::data().gpu("h100");
  const plan_result p = test::plan_of(gpt2.spec, gpt2_run(120));
  REQUIRE(p.allocator.has_value());
  CHECK_FALSE(p.allocator->tensors_fit);
  sweep_space space;
  space.models.push_back(gpt2);
  space.gpus.push_back({h100, test::data().calibration_for(h100)});
  space.precisions = {precision_regime::amp_bf16};
  space.seqs = {1024};
  space.micro_batches = {120};
  space.base.profile = &profile_named("hf");
  const sweep_result row = evaluate_point(space.at(0), nullptr, true);
  REQUIRE(row.plan.has_value());
  CHECK_FALSE(row.plan->fits);
  CHECK(row.plan->peak_bytes == p.peak_bytes);
  CHECK(row.plan->peak_bytes > row.plan->tensor_peak_bytes + p.overhead.cuda_context_bytes + p.overhead.cublas_workspace_bytes);
}

TEST_CASE("hf: a run that runs out of memory on its GPU is never said to need less than the GPU has", "[allocator][hf]") {
  // Mistral-7B, seq 44,745, full recomputation on an H200: the replay runs out in the GPU's memory yet completes
  // in 139.3 GiB (a tighter limit frees cached segments sooner); the least memory is searched above the GPU's.
  run_config r;
  r.profile = &profile_named("hf");
  r.precision = precision_regime::amp_bf16;
  r.seq = 44745;
  r.recompute = recompute_mode::full;
  const gpu_spec& h200 = test::data().gpu("h200");
  const model_spec& mistral = test::data().model("mistral-7b").spec;
  const plan_result p = evaluate_plan(mistral, r, h200, test::data().calibration_for(h200));
  REQUIRE(p.allocator.has_value());
  CHECK(p.allocator->out_of_memory);
  CHECK_FALSE(p.fits);
  CHECK(p.peak_bytes > h200.memory_bytes);
  // and the replay completes in what it says it needs
  const std::uint64_t capacity = h200.memory_bytes - p.overhead.cuda_context_bytes - p.overhead.cublas_workspace_bytes;
  const allocator_schedule schedule = schedule_allocations(p.inv, describe_model(mistral), 1);
  CHECK(replay_schedule(schedule, nullptr, capacity, true).out_of_memory);
  CHECK_FALSE(replay_schedule(schedule, nullptr, p.allocator->peak_reserved_bytes, true).out_of_memory);
}

TEST_CASE("hf: a replay that stops at the first failure fails where the whole replay does", "[allocator][hf]") {
  // apply_allocator_replay's bisection asks only whether a capacity suffices: its probes stop at the failure.
  const plan_result p = test::plan_of(test::data().model("gpt2").spec, gpt2_run(48));
  const model_facts facts = describe_model(test::data().model("gpt2").spec);
  const std::uint64_t capacity = p.allocator->peak_reserved_bytes - (64ull << 20);  // 64 MiB short of what it needs
  const allocator_schedule schedule = plan_allocator_schedule(p, facts);  // the plan's, its cuBLAS workspaces included
  const allocator_replay whole = replay_schedule(schedule, nullptr, capacity);
  const allocator_replay probe = replay_schedule(schedule, nullptr, capacity, true);
  REQUIRE(whole.out_of_memory);
  CHECK(probe.out_of_memory);
  CHECK(probe.failed_tensor == whole.failed_tensor);
  CHECK(probe.failed_step == whole.failed_step);
  CHECK(probe.peak_allocated_bytes <= whole.peak_allocated_bytes);
  // With enough memory a probe runs every step, as the whole replay does.
  const allocator_replay enough = replay_schedule(schedule, nullptr, p.allocator->peak_reserved_bytes, true);
  CHECK_FALSE(enough.out_of_memory);
  CHECK(enough.peak_reserved_bytes == p.allocator->peak_reserved_bytes);
}

namespace {

// Llama-2-7B at seq 4096 with AdamW's state offloaded: 67 GiB of tensors on an 80 GB H100, where the
// allocator's cache fills the GPU until it runs short and frees it.
run_config offloaded_7b_run() {
  run_config r;
  r.profile = &profile_named("hf");
  r.precision = precision_regime::amp_bf16;
  r.seq = 4096;
  r.offload = offload_mode::optimizer;
  return r;
}

}  // namespace

TEST_CASE("hf: a run that fits only by freeing the allocator's cache peaks at the least memory it completes in", "[allocator][hf]") {
  // Its replay in the GPU's memory reserves nearly all of it (it once showed 0.2 MiB of headroom): a cache,
  // not what the run needs. The peak is the least memory in which the replay completes, as for a run that
  // does not fit.
  const model_spec& llama = test::data().model("llama-2-7b").spec;
  const gpu_spec& h100 = test::data().gpu("h100");
  const plan_result p = test::plan_of(llama, offloaded_7b_run());
  REQUIRE(p.allocator.has_value());
  CHECK(p.fits);
  CHECK_FALSE(p.allocator->out_of_memory);
  CHECK(p.allocator->cache_releases >= 1);
  const std::uint64_t capacity = h100.memory_bytes - p.overhead.cuda_context_bytes - p.overhead.cublas_workspace_bytes;
  const allocator_schedule schedule = plan_allocator_schedule(p, describe_model(llama));
  const allocator_replay in_gpu = replay_schedule(schedule, nullptr, capacity);
  REQUIRE(in_gpu.cache_releases == p.allocator->cache_releases);
  const std::uint64_t least = p.allocator->peak_reserved_bytes;
  CHECK(least < in_gpu.peak_reserved_bytes);  // below what its cache filled
  CHECK(p.allocator->budget_reserved_bytes == in_gpu.peak_reserved_bytes);  // what a measurement on the GPU would read
  CHECK(least >= p.allocator->peak_allocated_bytes);
  CHECK(p.peak_bytes == p.overhead.cuda_context_bytes + p.overhead.cublas_workspace_bytes + least);
  CHECK(p.headroom_bytes == static_cast<std::int64_t>(h100.memory_bytes - p.peak_bytes));
  // the replay completes in it and runs out in 2 MiB less (the bisection's bound)
  CHECK_FALSE(replay_schedule(schedule, nullptr, least, true).out_of_memory);
  CHECK(replay_schedule(schedule, nullptr, least - (2ull << 20), true).out_of_memory);
}

TEST_CASE("hf: a safety margin is the memory the allocator gets", "[allocator][hf]") {
  // As under torch.cuda.set_per_process_memory_fraction: the replay runs in the budget. A run that does not
  // run short there keeps the fit check's peak.
  const sweep_model gpt2{test::data().model("gpt2").spec, describe_model(test::data().model("gpt2").spec)};
  const gpu_spec& h100 = test::data().gpu("h100");
  const sweep_gpu gpu{h100, test::data().calibration_for(h100)};
  const std::optional<config_summary> s = summarize_config(gpt2, gpu, gpt2_run(8), 0.5);
  REQUIRE(s.has_value());
  CHECK(s->peak_bytes == test::plan_of(gpt2.spec, gpt2_run(8)).peak_bytes);
  CHECK(s->fits == (s->peak_bytes <= memory_budget(h100, 0.5)));
  // The offloaded 7B run fills a 10% margin's budget with its cache too, and completes in it by freeing the
  // cache: it fits, with the least memory it completes in, within the budget, for its peak.
  const sweep_model llama{test::data().model("llama-2-7b").spec, describe_model(test::data().model("llama-2-7b").spec)};
  const std::uint64_t budget = memory_budget(h100, 0.1);
  const std::optional<config_summary> offloaded = summarize_config(llama, gpu, offloaded_7b_run(), 0.1);
  REQUIRE(offloaded.has_value());
  CHECK(offloaded->fits);
  CHECK(offloaded->peak_bytes <= budget);
  const plan_result p = test::plan_of(llama.spec, offloaded_7b_run());
  const std::uint64_t fixed = p.overhead.cuda_context_bytes + p.overhead.cublas_workspace_bytes;
  const allocator_replay in_budget = replay_schedule(schedule_allocations(p.inv, llama.facts, 1), nullptr, budget - fixed);
  CHECK_FALSE(in_budget.out_of_memory);
  CHECK(in_budget.cache_releases >= 1);
  CHECK(offloaded->peak_bytes < fixed + in_budget.peak_reserved_bytes);
}

TEST_CASE("hf: a model too large to replay keeps the estimate, and the count of its replay is exact", "[allocator][hf]") {
  // A million layers once made the replay take minutes and tens of GB of host memory.
  for (const char* name : {"gpt2", "llama-3.1-405b", "deepseek-v3"}) {
    INFO(name);
    run_config r = gpt2_run(2);
    r.dropout = 0;
    r.grad_accum = 4;
    const model_spec& m = test::data().model(name).spec;
    const plan_result p = test::plan_of(m, r);
    CHECK(count_schedule_instances(p.inv, describe_model(m), 4) == schedule_allocations(p.inv, describe_model(m), 4).instances);
    CHECK(p.allocator_replay_skipped_instances == 0);
  }
  model_spec deep = test::data().model("gpt2").spec;
  deep.layers = 30000;
  deep.name = "deep";
  const plan_result p = test::plan_of(deep, gpt2_run(1));
  CHECK_FALSE(p.allocator.has_value());
  CHECK(p.allocator_replay_skipped_instances > max_replayed_instances);
  CHECK(p.peak_bytes == p.tensor_peak_bytes + p.overhead.total());  // the estimate: tensors and the slack
  CHECK(p.overhead.allocator_slack_bytes > 0);
}

namespace {

// The least memory in which a schedule's replay completes, searched as the plain bisection searches it: every
// probe replayed from the start, none skipped (apply_allocator_replay's bounds: between what the budget leaves,
// or the tensors, and what it reserves with no limit).
std::uint64_t plain_least_completing(const allocator_schedule& schedule, std::uint64_t fails, std::uint64_t completes) {
  constexpr std::uint64_t step = 2ull << 20;
  while (completes - fails > 1) {
    const std::uint64_t mid = fails + (completes - fails) / 2;
    (replay_schedule(schedule, nullptr, mid * step, true).out_of_memory ? fails : completes) = mid;
  }
  return completes * step;
}

}  // namespace

TEST_CASE("hf: the bisection for the least memory skips what a probe answered and finds the plain bisection's answer",
          "[allocator][hf]") {
  // A probe's replay also answers every capacity in which it would make the same choices
  // (planner/allocator/capacity_checks.hpp); the bisection takes those answers instead of replaying them. Its
  // result must be the plain bisection's, bit for bit, in fewer replays: runs that do not fit their budget, and
  // runs that complete only by freeing the allocator's cache.
  constexpr std::uint64_t step = 2ull << 20;
  const case_run cases[] = {{"gpt2", gpt2_run(48)},
                            {"gpt2", gpt2_run(96, recompute_mode::full)},
                            {"tinyllama-1.1b", gpt2_run(16)},
                            {"llama-2-7b", offloaded_7b_run()}};
  std::uint64_t replays_skipping = 0, replays_plain = 0, out_of_memory = 0, releasing = 0;
  for (const case_run& c : cases) {
    const model_facts facts = describe_model(test::data().model(c.model).spec);
    const plan_result p = plan_with_replay(c);
    const std::uint64_t fixed = p.overhead.fixed_bytes();
    const allocator_schedule schedule = plan_allocator_schedule(p, facts);
    const allocator_replay with_no_limit = replay_schedule(schedule);
    const std::uint64_t unlimited = with_no_limit.peak_reserved_bytes;
    for (const double share : {0.97, 0.85, 0.7, 0.55}) {
      const std::uint64_t capacity = static_cast<std::uint64_t>(static_cast<double>(unlimited) * share) + 12345;
      INFO(c.model << " micro-batch " << c.run.micro_batch << ", capacity " << capacity);
      plan_result q = p;
      const std::uint64_t before = thread_replay_counters().replays;
      apply_allocator_replay(q, facts, fixed + capacity);
      replays_skipping += thread_replay_counters().replays - before;
      REQUIRE(q.allocator.has_value());
      const std::uint64_t plain_before = thread_replay_counters().replays;
      const allocator_replay in_budget = replay_schedule(schedule, nullptr, capacity);
      std::uint64_t expected = in_budget.peak_reserved_bytes;
      if (in_budget.out_of_memory) {
        // from the tensors' peak as the replay with no limit places them (apply_allocator_replay)
        const std::uint64_t fails = std::max(with_no_limit.peak_allocated_bytes, capacity) / step;
        expected = plain_least_completing(schedule, fails, std::max(fails + 1, (unlimited + step - 1) / step));
        ++out_of_memory;
      } else if (in_budget.cache_releases > 0) {
        const std::uint64_t fails = (in_budget.peak_allocated_bytes - 1) / step, completes = (expected + step - 1) / step;
        if (completes > fails + 1 && completes * step <= capacity)
          expected = std::min(expected, plain_least_completing(schedule, fails, completes));
        ++releasing;
      }
      // (Out of memory, both also replay with no limit, for the search's upper bound: counted once here.)
      replays_plain += thread_replay_counters().replays - plain_before + (in_budget.out_of_memory ? 1 : 0);
      CHECK(q.allocator->out_of_memory == in_budget.out_of_memory);
      CHECK(q.allocator->peak_reserved_bytes == expected);
    }
  }
  CHECK(out_of_memory >= 8);
  CHECK(releasing >= 1);
  CHECK(replays_skipping < replays_plain);
  WARN(out_of_memory + releasing << " searches for the least memory (" << releasing << " of runs that free the cache): "
                                 << replays_skipping << " replays, against " << replays_plain << " for the plain bisection");
}

TEST_CASE("hf: replays recalled from a program's earlier ones give every capacity the answer of its own replay",
          "[allocator][hf]") {
  // A program asked for several capacities (a sweep over GPUs or budgets) recalls an earlier replay wherever the
  // capacity lies in that replay's same-replay range (planner/allocator/known_replays.hpp), the budget's, the
  // unlimited one and the bisection's probes alike. Each outcome must be what the program gives with nothing
  // recalled, field by field, in fewer replays.
  const case_run cases[] = {{"gpt2", gpt2_run(48)}, {"tinyllama-1.1b", gpt2_run(16)}, {"llama-2-7b", offloaded_7b_run()}};
  std::uint64_t made_alone = 0, made_shared = 0, recalled = 0, outcomes = 0;
  for (const case_run& c : cases) {
    const model_facts facts = describe_model(test::data().model(c.model).spec);
    const plan_result p = plan_with_replay(c);
    const std::uint64_t fixed = p.overhead.fixed_bytes();
    const std::uint64_t unlimited = replay_schedule(plan_allocator_schedule(p, facts)).peak_reserved_bytes;
    program_cache programs;
    // Capacities above what it reserves with no limit (where one replay answers all), inside its range of
    // failures, and a few MiB apart (where the probes of one bisection answer the next).
    for (const double share : {1.5, 1.2, 1.01, 0.9, 0.9 + 1e-4, 0.9 + 2e-4, 0.75, 0.6, 0.6 + 3e-4}) {
      const std::uint64_t capacity = static_cast<std::uint64_t>(static_cast<double>(unlimited) * share) + 4321;
      INFO(c.model << " capacity " << capacity);
      plan_result alone = p, shared = p;
      const replay_counters before_alone = thread_replay_counters();
      apply_allocator_replay(alone, facts, fixed + capacity);
      made_alone += thread_replay_counters().replays - before_alone.replays;
      const replay_counters before_shared = thread_replay_counters();
      apply_allocator_replay(shared, facts, fixed + capacity, nullptr, &programs);
      made_shared += thread_replay_counters().replays - before_shared.replays;
      recalled += thread_replay_counters().replays_recalled - before_shared.replays_recalled;
      REQUIRE(alone.allocator.has_value());
      REQUIRE(shared.allocator.has_value());
      const allocator_replay &a = *alone.allocator, &b = *shared.allocator;
      CHECK(a.peak_allocated_bytes == b.peak_allocated_bytes);
      CHECK(a.peak_reserved_bytes == b.peak_reserved_bytes);
      CHECK(a.budget_reserved_bytes == b.budget_reserved_bytes);
      CHECK(a.out_of_memory == b.out_of_memory);
      CHECK(a.failed_tensor == b.failed_tensor);
      CHECK(a.failed_step == b.failed_step);
      CHECK(a.cache_releases == b.cache_releases);
      CHECK(a.segments_made == b.segments_made);
      CHECK(a.tensors_fit == b.tensors_fit);
      CHECK(a.same_replay_from_bytes == b.same_replay_from_bytes);
      CHECK(a.same_replay_below_bytes == b.same_replay_below_bytes);
      CHECK(alone.peak_bytes == shared.peak_bytes);
      CHECK(alone.fits == shared.fits);
      ++outcomes;
    }
  }
  CHECK(recalled > 0);
  CHECK(made_shared + recalled == made_alone);  // the same replays asked for, each made or recalled
  CHECK(made_shared < made_alone);
  WARN(outcomes << " outcomes: " << made_shared << " replays made and " << recalled << " recalled, against "
                << made_alone << " made with nothing recalled");
}
