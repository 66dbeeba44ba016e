// hf's backward op by op (inventory::backward_programs, planner/profiles/hf/activations_hf_backward.hpp): GPT-2 on SDPA's
// fused kernel, under autocast with dropout (S5's and S1's recorded allocator histories) or in bf16 without it (S3's). The steps name
// buffers and parameters by name; a name that resolves to nothing is skipped by the replay, so these tests
// check that every name resolves, that every buffer a layer keeps for its backward is released by a step,
// and where the steps apply.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>

#include "planner/model/model_facts.hpp"
#include "planner/allocator/allocator_trace.hpp"
#include "planner/measure/measured_runs.hpp"
#include "tests/planner/measured_runs.hpp"
#include "tests/planner/plan_helpers.hpp"

using namespace trainplan;

namespace {

const measured_run& shared_run(const measured_file& f, const std::string& id) {
  const auto it = std::find_if(f.runs.begin(), f.runs.end(), [&](const measured_run& r) { return r.id == id; });
  REQUIRE(it != f.runs.end());
  return *it;
}

std::size_t programs_of(const inventory& inv) {
  std::size_t n = 0;
  for (const backward_program& p : inv.backward_programs) n += p.count > 0;
  return n;
}

}  // namespace

TEST_CASE("hf GPT-2 backward op by op: every step names a buffer the inventory holds, every part a parameter",
          "[framework][hf][program]") {
  const measured_file f = test::shared_h100_measurements();
  // amp-bf16 SDPA with dropout: not checkpointed, checkpointed, 24 layers, fused AdamW; bf16 without dropout (S3)
  for (const char* id : {"S1", "S5", "S12", "S13", "S3"}) {
    INFO(id);
    const measured_run& r = shared_run(f, id);
    const inventory inv = test::inventory_of(r.model, r.run);
    REQUIRE(programs_of(inv) == 3);
    const model_facts facts = describe_model(r.model);
    std::size_t steps = 0, recomputes = 0;
    for (const backward_program& p : inv.backward_programs)
      for (std::size_t k = 0; k < p.count; ++k) {
        const backward_step& st = p.steps[k];
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
    CHECK(recomputes == (r.run.precision == precision_regime::bf16 ? 0u : 1u));  // the autocast layer's
    CHECK(steps > 100);
  }
}

TEST_CASE("hf GPT-2 backward op by op: every buffer a layer keeps for its backward is released by a step",
          "[framework][hf][program]") {
  // What the forward saves (or, checkpointed, what the recomputation rebuilds), the weight copies, the layer's
  // input and the backward's own temporaries: each freed where the history frees it, none left to the event's end.
  const measured_file f = test::shared_h100_measurements();
  for (const char* id : {"S1", "S5", "S3"}) {
    INFO(id);
    const measured_run& r = shared_run(f, id);
    const inventory inv = test::inventory_of(r.model, r.run);
    const backward_program& layer = inv.backward_programs[1];
    REQUIRE(layer.event == event_kind::bwd_layer);
    std::set<std::string_view> released;
    for (std::size_t k = 0; k < layer.count; ++k)
      if (layer.steps[k].kind == backward_step::free) released.insert(layer.steps[k].tensor);
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
    CHECK(checked > 30);
  }
}

TEST_CASE("hf GPT-2 backward op by op only where a recorded history shows it", "[framework][hf][program]") {
  const measured_file f = test::shared_h100_measurements();
  const measured_run& s1 = shared_run(f, "S1");
  CHECK(programs_of(test::inventory_of(s1.model, s1.run)) == 3);
  auto without = [&](auto change) {
    run_config r = s1.run;
    change(r);
    return programs_of(test::inventory_of(s1.model, r));
  };
  CHECK(without([](run_config& r) { r.dropout = 0; }) == 0);
  CHECK(without([](run_config& r) { r.attention = attention_kind::eager; }) == 0);
  CHECK(without([](run_config& r) { r.precision = precision_regime::bf16; }) == 0);
  CHECK(without([](run_config& r) { r.grad_accum = 2; }) == 0);
  CHECK(without([](run_config& r) {
          r.finetune = finetune_kind::lora;
          r.lora_targets = lora_q | lora_v;
        }) == 0);
  CHECK(without([](run_config& r) { r.precision = precision_regime::amp_fp16; }) == 3);  // E5's: the same casts
  const measured_run& s6 = shared_run(f, "S6");  // a Llama under autocast
  CHECK(programs_of(test::inventory_of(s6.model, s6.run)) == 0);
  // A 16-bit GPT-2 without dropout, not checkpointed (S3's history); not with dropout, checkpointed, or in fp32 (S4).
  const measured_run& s3 = shared_run(f, "S3");
  CHECK(programs_of(test::inventory_of(s3.model, s3.run)) == 3);
  run_config r3 = s3.run;
  r3.recompute = recompute_mode::full;
  CHECK(programs_of(test::inventory_of(s3.model, r3)) == 0);
  r3 = s3.run;
  r3.dropout = 0.1;
  CHECK(programs_of(test::inventory_of(s3.model, r3)) == 0);
  const measured_run& s4 = shared_run(f, "S4");
  CHECK(programs_of(test::inventory_of(s4.model, s4.run)) == 0);
}

TEST_CASE("hf GPT-2 backward op by op: each layer's gradients appear one parameter at a time", "[framework][hf][program]") {
  // c_proj's weight gradient before c_fc's, then attn.c_proj's, then c_attn's (S5's history: 9, 9, 2.25 and
  // 6.75 MiB, each right after its cast's backward; S3's: in bf16, each where its GEMM writes it), with gelu_new's
  // temporaries between them.
  const measured_file f = test::shared_h100_measurements();
  for (const char* id : {"S1", "S3"}) {
    INFO(id);
    const measured_run& r = shared_run(f, id);
    const plan_result p = test::plan_of(r.model, r.run);
    const allocator_schedule schedule = plan_allocator_schedule(p, describe_model(r.model));
    std::size_t grads = 0;
    for (std::size_t i = 0; i < p.inv.tensors.size(); ++i)
      if (p.inv.tensors[i].name == "layer{}.grads") grads = i;
    REQUIRE(p.inv.tensors[grads].name == "layer{}.grads");
    // The first layer backward of step 0: the pieces in the order allocated.
    std::vector<std::uint64_t> order;
    std::uint64_t instance = ~0ull;
    for (const allocator_schedule::op& o : schedule.ops) {
      if (o.tensor != grads || o.free || o.piece < 0) continue;
      if (instance == ~0ull) instance = o.instance;
      if (o.instance != instance) break;
      const std::uint64_t bytes = schedule.sizes[grads][static_cast<std::size_t>(o.piece)];
      if (bytes > (1u << 20)) order.push_back(bytes);
    }
    const std::uint64_t h = 768, width = r.run.precision == precision_regime::bf16 ? 2 : 4;  // the .grad's dtype
    CHECK(order == std::vector<std::uint64_t>{4 * h * h * width, 4 * h * h * width, h * h * width, 3 * h * h * width});
  }
}
