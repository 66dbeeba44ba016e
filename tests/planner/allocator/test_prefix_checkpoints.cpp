// Replays resumed at the first optimizer step from another program's state (prefix_checkpoints in
// planner/allocator/replay_program.hpp) against the same replays from the start: random configurations of the
// hf, fsdp2 and deepspeed stacks, each under several optimizers and implementations (programs that begin alike
// and part at the optimizer), replayed in capacities that make the allocator free its cache or run out; every
// field of the result, the same-replay range and the reserved path equal.
#include <catch2/catch.hpp>

#include <random>
#include <stdexcept>
#include <vector>

#include "planner/allocator/replay_program.hpp"
#include "planner/evaluate/plan.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/util/input_error.hpp"
#include "tests/support/replay_checks.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;

namespace {

// The reference's fields (check_same_result), and those only the fast replay gives: where it failed and where
// any capacity would make the same replay.
void check_same_replay(const allocator_replay& resumed, const allocator_replay& whole) {
  test::check_same_result(resumed, whole);
  CHECK(resumed.reserved_before_failure_bytes == whole.reserved_before_failure_bytes);
  CHECK(resumed.segments_before_failure == whole.segments_before_failure);
  CHECK(resumed.first_failed_check_event == whole.first_failed_check_event);
  CHECK(resumed.same_replay_from_bytes == whole.same_replay_from_bytes);
  CHECK(resumed.same_replay_below_bytes == whole.same_replay_below_bytes);
}

}  // namespace

TEST_CASE("prefix checkpoints: a replay resumed at the first optimizer step is the replay from the start", "[allocator]") {
  const catalog& data = test::data();
  const gpu_spec& h100 = data.gpu("h100");
  const calibration calib = data.calibration_for(h100);
  std::mt19937_64 rng(20261129);
  auto pick = [&rng](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const char* stacks[] = {"hf", "fsdp2", "deepspeed"};
  const precision_regime precisions[] = {precision_regime::fp32, precision_regime::bf16_mixed, precision_regime::bf16,
                                         precision_regime::amp_bf16};
  const optimizer_kind optimizers[] = {optimizer_kind::adamw, optimizer_kind::adafactor, optimizer_kind::adamw_8bit,
                                       optimizer_kind::lion, optimizer_kind::sgd_momentum};
  std::uint64_t bases = 0, replays = 0, out_of_memory = 0, releasing = 0;
  std::uint64_t resumed_total = 0, resumed_out_of_memory = 0, resumed_releasing = 0;
  while (bases < 150) {
    const model_preset& preset = data.models()[pick(data.models().size())];
    model_spec m = preset.spec;
    m.layers = std::min<std::uint64_t>(m.layers, m.dense_layers + 2 + pick(2));
    run_config base;
    const std::size_t stack = pick(3);
    base.profile = &profile_named(stacks[stack]);
    base.precision = precisions[pick(std::size(precisions))];
    base.recompute = static_cast<recompute_mode>(pick(3));
    base.attention = pick(2) ? attention_kind::flash : attention_kind::eager;
    base.seq = 64u << pick(5);
    if (m.max_positions > 0) base.seq = std::min(base.seq, m.max_positions);
    base.micro_batch = 1 + pick(3);
    base.grad_accum = 1 + pick(3);
    base.expandable_segments = pick(4) == 0;
    if (stack > 0) base.gpus = 2u << pick(2), base.zero = static_cast<int>(stack == 2 ? 1 + pick(3) : pick(4));
    if (!replays_allocator(base)) continue;
    const model_facts facts = describe_model(m);
    // The variants: each optimizer, fused and foreach; all of one base share their prefix's store.
    prefix_checkpoints store(256ull << 20);
    std::uint64_t variants = 0;
    for (const optimizer_kind optimizer : optimizers)
      for (const optimizer_impl_kind impl : {optimizer_impl_kind::fused, optimizer_impl_kind::foreach_impl}) {
        run_config r = base;
        r.optimizer = optimizer;
        r.optimizer_impl = impl;
        plan_options options;
        options.facts = &facts;
        options.detail = timeline_detail::peak;
        plan_result p;
        replay_program program;
        try {
          p = evaluate_plan(m, r, h100, calib, options);
          program = compile_schedule(plan_allocator_schedule(p, facts));
        } catch (const std::exception&) {  // an invalid run, or a schedule the planner cannot build
          continue;
        }
        ++variants;
        REQUIRE(program.prefix_end > 0);
        const allocator_replay unlimited = replay_compiled(program);
        // No limit, the reserved peak (completes, maybe by freeing its cache), between the tensors and the
        // reserved peak, and at the tensors' peak (frees its cache or runs out).
        const std::uint64_t reserved = unlimited.peak_reserved_bytes, allocated = unlimited.peak_allocated_bytes;
        for (const std::uint64_t capacity : {std::uint64_t{~0ull}, reserved, allocated + (reserved - allocated) / 2, allocated})
          for (const bool stop : {true, false}) {
            INFO(preset.spec.name << " " << stacks[stack] << " " << optimizer_name(optimizer) << " capacity " << capacity << " stop " << stop);
            replay_options whole_options, resumed_options;
            reserved_path whole_path, resumed_path;
            whole_options.capacity_bytes = resumed_options.capacity_bytes = capacity;
            whole_options.stop_at_out_of_memory = resumed_options.stop_at_out_of_memory = stop;
            whole_options.path = &whole_path;
            resumed_options.path = &resumed_path;
            resumed_options.prefixes = &store;
            const std::uint64_t resumed_before = store.resumed();
            const allocator_replay whole = replay_compiled(program, whole_options);
            const allocator_replay resumed = replay_compiled(program, resumed_options);
            check_same_replay(resumed, whole);
            CHECK(resumed_path == whole_path);
            ++replays;
            out_of_memory += whole.out_of_memory;
            releasing += whole.cache_releases > 0;
            if (store.resumed() > resumed_before) {
              ++resumed_total;
              resumed_out_of_memory += whole.out_of_memory;
              resumed_releasing += whole.cache_releases > 0;
              CHECK(resumed.events_replayed < whole.events_replayed);
            }
          }
      }
    bases += variants > 1;
  }
  WARN(bases << " runs under several optimizers, " << replays << " replays compared (" << out_of_memory << " out of memory, "
             << releasing << " freeing their cache); " << resumed_total << " resumed from another program's state ("
             << resumed_out_of_memory << " out of memory, " << resumed_releasing << " freeing their cache)");
  CHECK(resumed_total >= replays / 2);
  CHECK(resumed_out_of_memory > 0);
  CHECK(resumed_releasing > 0);
}
