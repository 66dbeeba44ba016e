// hf's backward op by op (inventory::backward_programs, planner/profiles/hf/activations_hf_backward.hpp): GPT-2 fully
// fine-tuned on SDPA's fused kernel, under autocast or in a 16-bit model, with or without dropout and
// checkpointing, any accumulation, several data-parallel GPUs below ZeRO-2. The steps name buffers and parameters
// by name and apply under conditions; these tests check, over that whole grid, that every step that applies names
// what the inventory holds (the replay refuses a program that does not), that every buffer a layer keeps for its
// backward is released by a step, that the layer is rebuilt once where it is checkpointed, and where the program
// applies and where it does not.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>

#include "planner/allocator/allocator_trace.hpp"
#include "planner/model/model_facts.hpp"
#include "tests/support/plan_helpers.hpp"

using namespace trainplan;

namespace {

std::size_t programs_of(const inventory& inv) {
  std::size_t n = 0;
  for (const backward_program& p : inv.backward_programs) n += p.count > 0;
  return n;
}

// GPT-2 small or medium at s1024 b4 under hf, with each variation the program covers.
struct gpt_case {
  std::string model;
  precision_regime precision;
  double dropout;
  recompute_mode recompute;
  std::uint64_t grad_accum, gpus;
  int zero;
};

std::vector<gpt_case> covered_cases() {
  std::vector<gpt_case> out;
  for (const char* model : {"gpt2", "gpt2-medium"})
    for (precision_regime p : {precision_regime::amp_bf16, precision_regime::amp_fp16, precision_regime::bf16})
      for (double dropout : {0.0, 0.1})
        for (recompute_mode rc : {recompute_mode::none, recompute_mode::full})
          for (std::uint64_t accum : {1ull, 3ull})
            out.push_back({model, p, dropout, rc, accum, 1, 0});
  out.push_back({"gpt2", precision_regime::amp_bf16, 0.1, recompute_mode::none, 2, 4, 1});  // DDP with ZeRO-1
  out.push_back({"gpt2", precision_regime::bf16, 0.0, recompute_mode::full, 1, 2, 0});
  return out;
}

run_config run_of(const gpt_case& c) {
  run_config r = test::run_of(1024, 4, c.recompute, attention_kind::flash, c.dropout);
  r.profile = &profile_named("hf");
  r.precision = c.precision;
  r.grad_accum = c.grad_accum;
  r.gpus = c.gpus;
  r.zero = c.zero;
  return r;
}

std::string label(const gpt_case& c) {
  return c.model + " " + std::string(precision_name(c.precision)) + " dropout " + std::to_string(c.dropout) + " " +
         std::string(recompute_name(c.recompute)) + " accum " + std::to_string(c.grad_accum) + " gpus " +
         std::to_string(c.gpus) + " zero " + std::to_string(c.zero);
}

}  // namespace

TEST_CASE("hf GPT-2 backward op by op: every step that applies names a buffer, every part a parameter",
          "[framework][hf][program]") {
  for (const gpt_case& c : covered_cases()) {
    INFO(label(c));
    const model_spec& m = test::data().model(c.model).spec;
    const run_config r = run_of(c);
    const inventory inv = test::inventory_of(m, r);
    REQUIRE(programs_of(inv) == 3);
    const model_facts facts = describe_model(m);
    std::size_t steps = 0, recomputes = 0;
    for (const backward_program& p : inv.backward_programs)
      for (std::size_t k = 0; k < p.count; ++k) {
        const backward_step& st = p.steps[k];
        if (!st.applies(p.holds)) continue;
        if (st.kind == backward_step::recompute) {
          ++recomputes;
          continue;
        }
        INFO(std::string(st.tensor) << " " << std::string(st.part));
        const bool held = std::any_of(inv.tensors.begin(), inv.tensors.end(),
                                      [&](const tensor_spec& t) { return t.name == st.tensor && t.replayed; });
        CHECK(held);
        if (!st.part.empty())
          CHECK(std::any_of(facts.tensors.begin(), facts.tensors.end(), [&](const param_tensor& t) { return t.name == st.part; }));
        ++steps;
      }
    CHECK(recomputes == 1);  // the layer's: where a checkpointed layer is rebuilt
    CHECK(steps > 100);
    // The replay resolves every step (it throws for one that names nothing).
    CHECK_NOTHROW(schedule_allocations(inv, facts, r.grad_accum));
  }
}

TEST_CASE("hf GPT-2 backward op by op: every buffer a layer keeps for its backward is released by a step",
          "[framework][hf][program]") {
  // What the forward saves (or, checkpointed, what the recomputation rebuilds), the weight copies, the layer's
  // input and the backward's own temporaries: each freed at its step, none left to the event's end.
  for (const gpt_case& c : covered_cases()) {
    INFO(label(c));
    const inventory inv = test::inventory_of(test::data().model(c.model).spec, run_of(c));
    const backward_program& layer = inv.backward_programs[1];
    REQUIRE(layer.event == event_kind::bwd_layer);
    std::set<std::string_view> released;
    for (std::size_t k = 0; k < layer.count; ++k)
      if (layer.steps[k].kind == backward_step::free && layer.steps[k].applies(layer.holds))
        released.insert(layer.steps[k].tensor);
    const std::int64_t bwd0 = event_index(event_kind::bwd_layer, 0, static_cast<std::int64_t>(inv.layers));
    std::size_t checked = 0;
    for (const tensor_spec& t : inv.tensors) {
      if (!t.per_layer || !t.replayed || t.lifetime != state_lifetime::micro_batch) continue;
      // Its last interval ends in the layer's backward event.
      const event_interval& last = t.intervals[static_cast<std::size_t>(t.interval_count - 1)];
      if (last.last_base != bwd0 || last.last_step != -1) continue;
      // A checkpointed forward's momentary temporaries recomputed in the backward free themselves there.
      if (t.momentary && t.name.starts_with("layer{}.fwd.")) continue;
      INFO(std::string(t.name));
      CHECK(released.count(t.name) == 1);
      ++checked;
    }
    CHECK(checked > 25);
  }
}

TEST_CASE("hf backward op by op where its modules' backward is written, coarse elsewhere, saying why",
          "[framework][hf][program]") {
  const model_spec& gpt2 = test::data().model("gpt2").spec;
  run_config base = run_of({"gpt2", precision_regime::amp_bf16, 0.1, recompute_mode::none, 1, 1, 0});
  REQUIRE(programs_of(test::inventory_of(gpt2, base)) == 3);
  auto without = [&](auto change, std::string_view reason) {
    run_config r = base;
    change(r);
    const inventory inv = test::inventory_of(gpt2, r);
    CHECK(programs_of(inv) == 0);
    CHECK(inv.coarse_backward_reason == reason);
  };
  without([](run_config& r) { r.attention = attention_kind::eager; }, "eager attention's backward");
  without([](run_config& r) { r.precision = precision_regime::fp32; }, "an fp32 model's backward");
  without([](run_config& r) { r.gpus = 4, r.zero = 2; }, "gradients sharded by ZeRO-2 or 3");
  without([](run_config& r) {
    r.finetune = finetune_kind::lora;
    r.lora_targets = lora_q | lora_v;
  }, "adapters' backward");
  // A Llama's backward is not written (its forward is, under autocast).
  run_config llama = base;
  llama.dropout = 0;
  const inventory inv = test::inventory_of(test::data().model("tinyllama-1.1b").spec, llama);
  CHECK(inv.forward_in_program_order);
  CHECK(programs_of(inv) == 0);
  CHECK(inv.coarse_backward_reason == "a Llama-family layer's backward");
}

TEST_CASE("a backward program that names a buffer the inventory lacks is refused, not skipped", "[framework][hf][program]") {
  const model_spec& gpt2 = test::data().model("gpt2").spec;
  const run_config r = run_of({"gpt2", precision_regime::amp_bf16, 0.1, recompute_mode::none, 1, 1, 0});
  inventory inv = test::inventory_of(gpt2, r);
  // The layer's dropout mask gone from the inventory: the steps that free it name nothing now.
  std::erase_if(inv.tensors, [](const tensor_spec& t) { return t.name == "layer{}.mlp.dropout_mask"; });
  CHECK_THROWS_WITH(schedule_allocations(inv, describe_model(gpt2), 1),
                    Catch::Contains("names no buffer") && Catch::Contains("layer{}.mlp.dropout_mask"));
}
