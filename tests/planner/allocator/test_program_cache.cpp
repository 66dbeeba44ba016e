// Replay programs shared by content (planner/allocator/program_cache.hpp): a configuration whose schedule is
// another's gets that program, event for event the one compiled for it alone; one whose schedule differs in
// anything the schedule reads gets its own.
#include <catch2/catch.hpp>

#include <algorithm>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "planner/allocator/program_cache.hpp"
#include "planner/evaluate/plan.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/util/input_error.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using trainplan::test::data;

namespace {

void check_same_program(const replay_program& shared, const replay_program& alone) {
  REQUIRE(shared.events().size() == alone.events().size());
  for (std::size_t k = 0; k < alone.events().size(); ++k) {
    const replay_program::event &a = shared.events()[k], &b = alone.events()[k];
    INFO("event " << k);
    REQUIRE((shared.bytes(a) == alone.bytes(b) && (a.size == 0) == (b.size == 0) && a.slot == b.slot && a.what == b.what && a.step == b.step && a.stop_check == b.stop_check &&
             a.workspace == b.workspace));
  }
  CHECK(shared.slots == alone.slots);
  CHECK(shared.workspace_bytes == alone.workspace_bytes);
  CHECK(shared.expandable_segments == alone.expandable_segments);
  CHECK(shared.gpu_total_bytes == alone.gpu_total_bytes);
  CHECK(shared.repeats == alone.repeats);
  CHECK(replay_compiled(shared).peak_reserved_bytes == replay_compiled(alone).peak_reserved_bytes);
}

schedule_settings settings_of(const allocator_schedule& s) {
  schedule_settings out;
  out.expandable_segments = s.expandable_segments;
  out.gpu_total_bytes = s.gpu_total_bytes;
  out.workspace_bytes = s.workspace_bytes;
  out.lt_workspace_bytes = s.lt_workspace_bytes;
  out.lt_after = s.lt_after;
  return out;
}

// GPT-2 under hf with autocast, seq 256, on the catalog's H100: the plan whose inventory the tests below vary.
plan_result gpt2_plan() {
  const gpu_spec& h100 = data().gpu("h100");
  run_config r;
  r.profile = &profile_named("hf");
  r.precision = precision_regime::amp_bf16;
  r.seq = 256;
  return evaluate_plan(data().model("gpt2").spec, r, h100, data().calibration_for(h100));
}

}  // namespace

TEST_CASE("program cache: DDP at 2, 4 and 8 GPUs shares one program, the one each compiles alone", "[allocator]") {
  const model_spec& gpt2 = data().model("gpt2").spec;
  const model_facts facts = describe_model(gpt2);
  const gpu_spec& h100 = data().gpu("h100");
  const calibration calib = data().calibration_for(h100);
  program_cache cache;
  for (const std::uint64_t gpus : {2, 4, 8}) {
    run_config r;
    r.profile = &profile_named("hf");
    r.precision = precision_regime::amp_bf16;
    r.seq = 512;
    r.micro_batch = 2;
    r.gpus = gpus;
    const plan_result p = evaluate_plan(gpt2, r, h100, calib);
    const allocator_schedule alone = plan_allocator_schedule(p, facts);
    check_same_program(cache.get(p.inv, facts, r.grad_accum, settings_of(alone)).program, compile_schedule(alone));
  }
  // DDP keeps a whole replica on each GPU: the inventories are equal (the gradient buckets too), one compile.
  CHECK(cache.misses() == 1);
  CHECK(cache.hits() == 2);
}

TEST_CASE("program cache: a change the schedule reads is a program of its own", "[allocator]") {
  const model_spec& gpt2 = data().model("gpt2").spec;
  const model_facts facts = describe_model(gpt2);
  const plan_result p = gpt2_plan();
  const allocator_schedule base = plan_allocator_schedule(p, facts);
  const schedule_settings settings = settings_of(base);
  program_cache cache;
  cache.get(p.inv, facts, 1, settings);
  REQUIRE(cache.misses() == 1);

  // The accumulation only through the micro-batches replayed (at most three: allocator_schedule.cpp).
  allocator_schedule three = schedule_allocations(p.inv, facts, 3);
  settings.apply(three);
  check_same_program(cache.get(p.inv, facts, 3, settings).program, compile_schedule(three));
  CHECK(cache.misses() == 2);
  cache.get(p.inv, facts, 7, settings);
  CHECK(cache.misses() == 2);
  const std::size_t two_steps = cache.get(p.inv, facts, 1, settings, 2).program.events().size();
  CHECK(two_steps < cache.get(p.inv, facts, 1, settings).program.events().size());
  CHECK(cache.misses() == 3);  // two steps

  schedule_settings expandable = settings;
  expandable.expandable_segments = true;
  CHECK(cache.get(p.inv, facts, 1, expandable).program.expandable_segments);
  CHECK(cache.misses() == 4);
  // The GPU's memory sizes the expandable segments' addresses only.
  schedule_settings other_gpu = settings;
  other_gpu.gpu_total_bytes = 40ull << 30;
  cache.get(p.inv, facts, 1, other_gpu);
  CHECK(cache.misses() == 4);
  expandable.gpu_total_bytes = 40ull << 30;
  cache.get(p.inv, facts, 1, expandable);
  CHECK(cache.misses() == 5);

  // One buffer's size, one buffer's lifetime, one buffer's name: each its own program.
  inventory bigger = p.inv;
  bigger.tensors.back().bytes += 512;
  allocator_schedule bigger_alone = schedule_allocations(bigger, facts, 1);
  settings.apply(bigger_alone);
  check_same_program(cache.get(bigger, facts, 1, settings).program, compile_schedule(bigger_alone));
  CHECK(cache.misses() == 6);
  // Any other field: a key of its own (the key's words; a schedule built from such an edit may not be valid).
  std::vector<std::uint64_t> key, edited;
  program_cache_key(p.inv, facts, 1, settings, 3, key);
  inventory later = p.inv;
  for (tensor_spec& t : later.tensors)
    if (t.interval_count > 0) {
      t.intervals[0].last_base += 1;
      break;
    }
  program_cache_key(later, facts, 1, settings, 3, edited);
  CHECK(edited != key);
  inventory renamed = p.inv;
  renamed.tensors.front().name = "another.name";
  program_cache_key(renamed, facts, 1, settings, 3, edited);
  CHECK(edited != key);
  inventory coarse = p.inv;
  coarse.forward_in_program_order = !coarse.forward_in_program_order;
  program_cache_key(coarse, facts, 1, settings, 3, edited);
  CHECK(edited != key);
  const model_facts other_facts = describe_model(gpt2);  // another model's facts: matched by address
  program_cache_key(p.inv, other_facts, 1, settings, 3, edited);
  CHECK(edited != key);
  // and the first again: still there
  cache.get(p.inv, facts, 1, settings);
  CHECK(cache.misses() == 6);
  CHECK(cache.hits() == 4);
}

TEST_CASE("program cache: a schedule resized from another of the same structure is the one built for it alone", "[allocator]") {
  // Micro-batches and sequence lengths change every activation's size and nothing else the schedule reads: the
  // second and later of each family take the first's operations (resize_schedule), and each program must be,
  // event for event, the one its own schedule compiles to; a change of lifetimes (recomputation) builds anew.
  const gpu_spec& h100 = data().gpu("h100");
  const calibration calib = data().calibration_for(h100);
  struct family {
    const char* model;
    const char* stack;
    precision_regime precision;
    recompute_mode recompute;
    std::uint64_t gpus;
    int zero;
  };
  const family families[] = {{"gpt2", "hf", precision_regime::amp_bf16, recompute_mode::none, 1, 0},
                             {"gpt2", "hf", precision_regime::bf16, recompute_mode::full, 1, 0},
                             {"tinyllama-1.1b", "hf", precision_regime::bf16, recompute_mode::none, 1, 0},
                             {"tinyllama-1.1b", "fsdp2", precision_regime::bf16_mixed, recompute_mode::full, 4, 3},
                             {"gpt2", "deepspeed", precision_regime::bf16_mixed, recompute_mode::none, 2, 2}};
  for (const family& f : families) {
    const model_spec& m = data().model(f.model).spec;
    const model_facts facts = describe_model(m);
    program_cache cache;
    std::uint64_t built = 0;
    for (const std::uint64_t micro_batch : {1, 2, 3})
      for (const std::uint64_t seq : {128, 320, 1024})
        for (const std::uint64_t grad_accum : {1, 4}) {
          run_config r;
          r.profile = &profile_named(f.stack);
          r.precision = f.precision;
          r.recompute = f.recompute;
          r.gpus = f.gpus;
          r.zero = f.zero;
          r.seq = seq;
          r.micro_batch = micro_batch;
          r.grad_accum = grad_accum;
          INFO(f.model << " " << f.stack << " b" << micro_batch << " s" << seq << " ga" << grad_accum);
          const plan_result p = evaluate_plan(m, r, h100, calib);
          const allocator_schedule alone = plan_allocator_schedule(p, facts);
          check_same_program(cache.get(p.inv, facts, grad_accum, settings_of(alone)).program, compile_schedule(alone));
          ++built;
        }
    INFO(f.model << " " << f.stack);
    CHECK(cache.misses() == built);
    // One structure per accumulation (one micro-batch or three replayed): every other schedule resized.
    CHECK(cache.structures_shared() == built - 2);
    // and every one of those refilled from the first program of its structure, not compiled (refill_program):
    // no piece empties and no workspace changes with the sizes here
    CHECK(cache.programs_refilled() == cache.structures_shared());
  }
}

TEST_CASE("program cache: a program is refilled only from a schedule with the same pieces and workspaces", "[allocator]") {
  // refill_program shares the events and makes a table of the new sizes; where a piece is empty in one schedule
  // and not the other, or a workspace is made in one only, the events themselves differ, and it must refuse.
  const model_facts facts = describe_model(data().model("gpt2").spec);
  const plan_result p = gpt2_plan();
  const allocator_schedule schedule = plan_allocator_schedule(p, facts);
  program_origins origins;
  const replay_program like = compile_schedule(schedule, &origins);
  REQUIRE(origins.repeats_at_any_size.size() == origins.repeat_candidates.size());
  replay_program out;
  // The same schedule with every size doubled: the same events, each allocation twice its bytes.
  allocator_schedule doubled = schedule;
  for (std::vector<std::uint64_t>& sizes : doubled.sizes)
    for (std::uint64_t& bytes : sizes) bytes *= 2;
  doubled.workspace_bytes *= 2;
  doubled.lt_workspace_bytes *= 2;
  REQUIRE(refill_program(like, origins, doubled, out));
  check_same_program(out, compile_schedule(doubled));
  REQUIRE(out.shared_events == like.shared_events);
  for (const replay_program::event& e : like.events())
    REQUIRE(out.bytes(e) == 2 * like.bytes(e));  // frees stay 0
  // A piece that empties: one allocation fewer.
  allocator_schedule emptied = schedule;
  const auto first = std::find_if(emptied.sizes.begin(), emptied.sizes.end(), [](const auto& sizes) { return !sizes.empty(); });
  REQUIRE(first != emptied.sizes.end());
  first->front() = 0;
  CHECK_FALSE(refill_program(like, origins, emptied, out));
  // No cuBLAS workspaces: two allocations fewer.
  allocator_schedule without_workspaces = schedule;
  REQUIRE(without_workspaces.workspace_bytes > 0);
  without_workspaces.workspace_bytes = 0;
  CHECK_FALSE(refill_program(like, origins, without_workspaces, out));
}

TEST_CASE("program cache: sharded layouts at other GPU counts, resized or built anew, each the program built alone", "[allocator]") {
  // ZeRO and FSDP shard the model state by the GPU count: the same buffers, other sizes, so the structure key
  // matches; where a shard no longer splits into whole parameters (3 GPUs), its pieces differ, and the schedule
  // must be built anew rather than resized.
  const gpu_spec& h100 = data().gpu("h100");
  const calibration calib = data().calibration_for(h100);
  for (const char* stack : {"deepspeed", "fsdp2"})
    for (const int zero : {1, 2, 3}) {
      if (std::string_view(stack) == "fsdp2" && zero != 3) continue;
      const model_spec& m = data().model("gpt2").spec;
      const model_facts facts = describe_model(m);
      program_cache cache;
      for (const std::uint64_t gpus : {2, 3, 4, 8}) {
        run_config r;
        r.profile = &profile_named(stack);
        r.precision = precision_regime::bf16_mixed;
        r.seq = 256;
        r.micro_batch = 2;
        r.gpus = gpus;
        r.zero = zero;
        INFO(stack << " zero " << zero << " gpus " << gpus);
        plan_result p;
        try {
          p = evaluate_plan(m, r, h100, calib);
        } catch (const input_error&) {
          continue;
        }
        allocator_schedule alone;
        try {
          alone = plan_allocator_schedule(p, facts);
        } catch (const std::logic_error&) {
          continue;  // a schedule the planner cannot build (test_replay_program.cpp says which)
        }
        check_same_program(cache.get(p.inv, facts, r.grad_accum, settings_of(alone)).program, compile_schedule(alone));
      }
      CHECK(cache.structures_shared() > 0);
      CHECK(cache.programs_refilled() <= cache.structures_shared());
    }
}

TEST_CASE("program cache: a buffer that no longer splits into whole parameters fails as the schedule built alone does", "[allocator]") {
  // GPT-2's backward places each parameter's gradient where its autograd node runs (a backward program): the
  // operations name one tensor of the gradients' buffer. The same inventory with that buffer a little larger has
  // the same structure key, but the buffer no longer splits into whole parameters (split_by_parameters), so the
  // named tensors do not exist: the resized schedule must not take the first one's operations silently, and
  // fails as building it alone does.
  const model_spec& gpt2 = data().model("gpt2").spec;
  const model_facts facts = describe_model(gpt2);
  const plan_result p = gpt2_plan();
  const allocator_schedule base = plan_allocator_schedule(p, facts);
  std::size_t placed_tensor = base.placed.size();
  for (std::size_t t = 0; t < base.placed.size() && placed_tensor == base.placed.size(); ++t)
    if (!base.placed[t].empty()) placed_tensor = t;
  REQUIRE(placed_tensor < base.placed.size());
  program_cache cache;
  cache.get(p.inv, facts, 1, settings_of(base));
  inventory whole = p.inv;
  whole.tensors[placed_tensor].bytes += 512;
  std::vector<std::uint64_t> key, other;
  schedule_structure_key(p.inv, facts, 1, 3, key);
  schedule_structure_key(whole, facts, 1, 3, other);
  REQUIRE(key == other);
  CHECK_THROWS_AS(schedule_allocations(whole, facts, 1), std::logic_error);
  CHECK_THROWS_AS(cache.get(whole, facts, 1, settings_of(base)), std::logic_error);
}

TEST_CASE("program cache: a new key whose program replays alike shares the earlier entry", "[allocator]") {
  // The key holds every field of the inventory, so an inventory that differs where the allocator cannot see it
  // (a summary field, a host buffer) is a miss; its program, built, equals the earlier one event for event, and
  // the new key then takes the earlier entry with its replays and outcomes (same_program_content).
  const model_facts facts = describe_model(data().model("gpt2").spec);
  const plan_result p = gpt2_plan();
  const schedule_settings settings = settings_of(plan_allocator_schedule(p, facts));
  program_cache cache;
  program_cache::entry& first = cache.get(p.inv, facts, 1, settings);
  inventory summary = p.inv;
  summary.activations_per_layer_bytes += 1;  // read by the report, not by the schedule
  program_cache::entry& second = cache.get(summary, facts, 1, settings);
  CHECK(cache.misses() == 2);
  CHECK(cache.contents_shared() == 1);
  CHECK(&second == &first);
  cache.get(summary, facts, 1, settings);  // the new key is kept: a hit
  CHECK(cache.hits() == 1);
  // A replayed buffer renamed: the same bytes in the same order, but a failure or a growth record would name
  // another buffer, so not shared.
  inventory renamed = p.inv;
  const auto replayed = std::find_if(renamed.tensors.begin(), renamed.tensors.end(), [](const tensor_spec& t) { return t.replayed && t.bytes > 0; });
  REQUIRE(replayed != renamed.tensors.end());
  replayed->name = "another.name";
  program_cache::entry& third = cache.get(renamed, facts, 1, settings);
  CHECK(&third != &first);
  CHECK(cache.contents_shared() == 1);
  CHECK_FALSE(same_program_content(first.program, third.program));
  // One size changed: not shared either.
  inventory bigger = p.inv;
  bigger.tensors.back().bytes += 512;
  CHECK(&cache.get(bigger, facts, 1, settings) != &first);
  CHECK(cache.contents_shared() == 1);
}

TEST_CASE("same_program_content: equal for a program and its refill with the same sizes, not for one size changed", "[allocator]") {
  const model_facts facts = describe_model(data().model("gpt2").spec);
  const plan_result p = gpt2_plan();  // the schedule points at its inventory
  const allocator_schedule schedule = plan_allocator_schedule(p, facts);
  program_origins origins;
  const replay_program compiled = compile_schedule(schedule, &origins);
  replay_program refilled;
  REQUIRE(refill_program(compiled, origins, schedule, refilled));
  CHECK(same_program_content(compiled, refilled));
  CHECK(same_program_content(compiled, compile_schedule(schedule)));  // its own events, compared one by one
  CHECK(program_content_hash(compiled) == program_content_hash(refilled));
  allocator_schedule other = schedule;
  for (std::vector<std::uint64_t>& sizes : other.sizes)
    if (!sizes.empty() && sizes.back() > 0) {
      sizes.back() += 512;
      break;
    }
  CHECK_FALSE(same_program_content(compiled, compile_schedule(other)));
  replay_program other_refilled;
  REQUIRE(refill_program(compiled, origins, other, other_refilled));
  CHECK_FALSE(same_program_content(compiled, other_refilled));
  allocator_schedule expandable = schedule;
  expandable.expandable_segments = true;
  CHECK_FALSE(same_program_content(compiled, compile_schedule(expandable)));
}
