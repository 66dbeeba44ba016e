// hf's forward op by op (inventory::forward_in_program_order, planner/profiles/hf/activations_hf_rows.hpp): the temporaries the
// recorded allocator histories of S1, S5, E13 and S6 show, made and freed by the allocator replay where PyTorch does,
// and left out of the peak timeline, which counts its coarser working set instead.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <set>

#include "planner/model/model_facts.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/allocator/allocator_trace.hpp"
#include "planner/memory/timeline.hpp"
#include "tests/support/plan_helpers.hpp"

using namespace trainplan;

namespace {

std::uint32_t index_of(const inventory& inv, std::string_view name) {
  for (std::uint32_t i = 0; i < inv.tensors.size(); ++i)
    if (inv.tensors[i].name == name) return i;
  FAIL("no buffer " << name);
  return 0;
}

}  // namespace

TEST_CASE("hf: the forward op by op wherever its modules' order is written, the coarse rows elsewhere, saying why",
          "[framework][hf][program]") {
  const model_spec& gpt2 = test::data().model("gpt2").spec;
  run_config r = test::gpt2_lora_run();
  CHECK(test::inventory_of(gpt2, r).forward_in_program_order);
  r.lora_dropout = 0.05;  // peft's dropout on each adapter's input: its mask, then its fp32 output, before lora_A
  const inventory dropped = test::inventory_of(gpt2, r);
  CHECK(dropped.forward_in_program_order);
  for (const char* row : {"layer{}.lora.qkv_dropout_mask", "layer{}.fwd.qkv_dropout_out", "layer{}.fwd.fc_dropout_out"})
    CHECK(test::tensor_named(dropped, row));
  CHECK(test::tensor_named(dropped, "layer{}.fwd.qkv_dropout_out")->momentary);
  r = test::gpt2_lora_run();
  r.recompute = recompute_mode::full;  // the forward saves nothing, the backward recomputes it all
  CHECK(test::inventory_of(gpt2, r).forward_in_program_order);
  r = test::gpt2_lora_run();
  r.precision = precision_regime::bf16;  // no autocast: no written order for peft's modules on GPT-2
  const inventory coarse = test::inventory_of(gpt2, r);
  CHECK_FALSE(coarse.forward_in_program_order);
  CHECK(coarse.coarse_forward_reason == "adapters on GPT-2 without autocast");
  r = test::gpt2_lora_run();
  r.finetune = finetune_kind::full;
  CHECK(test::inventory_of(gpt2, r).forward_in_program_order);
  // Llama-family models (S6's history; checkpointed, E2's): fully fine-tuned dense models on SDPA without a mask.
  const model_spec& tinyllama = test::data().model("tinyllama-1.1b").spec;
  CHECK(test::inventory_of(tinyllama, r).forward_in_program_order);
  run_config other = r;
  other.finetune = finetune_kind::lora;
  CHECK_FALSE(test::inventory_of(tinyllama, other).forward_in_program_order);
  CHECK(test::inventory_of(tinyllama, other).coarse_forward_reason == "adapters under autocast");
  other = r;
  other.recompute = recompute_mode::full;
  CHECK(test::inventory_of(tinyllama, other).forward_in_program_order);
  other = r;
  other.attention = attention_kind::eager;
  CHECK_FALSE(test::inventory_of(tinyllama, other).forward_in_program_order);
  CHECK(test::inventory_of(tinyllama, other).coarse_forward_reason == "eager attention under autocast");
  // An fp32 model: on SDPA's math path (grouped heads), not on the memory-efficient kernel (its order not written).
  other = r;
  other.precision = precision_regime::fp32;
  const inventory fp32_math = test::inventory_of(tinyllama, other);
  CHECK(fp32_math.forward_in_program_order);
  CHECK(test::tensor_named(fp32_math, "layer{}.fwd.causal_bias"));
  CHECK_FALSE(test::tensor_named(fp32_math, "layer{}.fwd.ln1_x_rsqrt"));  // RMSNorm reads its fp32 input as it is
  CHECK_FALSE(test::inventory_of(test::data().model("llama-2-7b").spec, other).forward_in_program_order);
  CHECK(test::inventory_of(test::data().model("llama-2-7b").spec, other).coarse_forward_reason == "an fp32 model's attention kernel");
  // A 16-bit model: the layer's input a tensor of its own beside RMSNorm's fp32 copy, which is
  // made in the layer.
  other.precision = precision_regime::bf16;
  const inventory bf16 = test::inventory_of(tinyllama, other);
  CHECK(bf16.forward_in_program_order);
  CHECK(test::tensor_named(bf16, "layer{}.fwd.input")->layer_begin == 1);
  CHECK_FALSE(test::tensor_named(bf16, "layer{}.fwd.input")->kept_to_backward);
  CHECK(test::tensor_named(bf16, "embed.out"));
  // Eager attention there: the s x s steps one by one, and softmax's third buffer in backward.
  run_config eager = other;
  eager.attention = attention_kind::eager;
  const inventory bf16_eager = test::inventory_of(tinyllama, eager);
  CHECK(bf16_eager.forward_in_program_order);
  for (const char* step : {"layer{}.fwd.attn_mm", "layer{}.fwd.attn_scaled", "layer{}.fwd.attn_masked", "layer{}.fwd.softmax_in",
                           "layer{}.fwd.attn_pv", "layer{}.bwd.softmax_grad_temp"}) {
    INFO(step);
    REQUIRE(test::tensor_named(bf16_eager, step));
    CHECK(test::tensor_named(bf16_eager, step)->momentary);
  }
  CHECK_FALSE(test::tensor_named(bf16_eager, "layer{}.attn.q_rope"));  // eager saves its own q copy instead
  CHECK(test::tensor_named(bf16_eager, "layer{}.attn.q"));
  // A 16-bit model checkpointed: no casts, RMSNorm's fp32 copy and temporaries.
  other.recompute = recompute_mode::full;
  const inventory bf16_ckpt = test::inventory_of(tinyllama, other);
  CHECK(bf16_ckpt.forward_in_program_order);
  CHECK(test::tensor_named(bf16_ckpt, "layer{}.ln1.upcast")->type == dtype::fp32);
  CHECK(test::tensor_named(bf16_ckpt, "layer{}.ln1.in")->type == dtype::bf16);  // the checkpoint's input
  CHECK_FALSE(test::tensor_named(bf16_ckpt, "layer{}.autocast.weights.q"));
  CHECK_FALSE(test::tensor_named(bf16_ckpt, "layer{}.attn.q_in"));
  CHECK(test::tensor_named(bf16_ckpt, "layer{}.fwd.ln1_x_rsqrt"));
}

TEST_CASE("hf GPT-2 program: the peak timeline counts what it did before, the replay what PyTorch makes", "[framework][hf][program]") {
  const inventory inv = test::inventory_of(test::data().model("gpt2").spec, test::gpt2_lora_run());
  // The momentary buffers are not counted: removing them leaves the timeline's peak as it is.
  inventory without = inv;
  std::uint64_t moments = 0;
  for (const tensor_spec& t : inv.tensors) moments += t.momentary;
  CHECK(moments >= 20);
  std::erase_if(without.tensors, [](const tensor_spec& t) { return t.momentary; });
  CHECK(walk_timeline(inv, 1, timeline_detail::peak).peak.live_bytes ==
        walk_timeline(without, 1, timeline_detail::peak).peak.live_bytes);
  // The working set the timeline counts in their place is not replayed.
  const std::uint32_t estimate = index_of(inv, "layer{}.fwd.mlp_temporaries");
  CHECK_FALSE(inv.tensors[estimate].replayed);
  const allocator_schedule schedule = schedule_allocations(inv, describe_model(test::data().model("gpt2").spec), 1);
  CHECK(std::none_of(schedule.ops.begin(), schedule.ops.end(), [&](const allocator_schedule::op& o) { return o.tensor == estimate; }));
}

TEST_CASE("hf GPT-2 program: temporaries die where their Python variable does", "[framework][hf][program]") {
  const inventory inv = test::inventory_of(test::data().model("gpt2").spec, test::gpt2_lora_run());
  const allocator_schedule schedule = schedule_allocations(inv, describe_model(test::data().model("gpt2").spec), 1);
  const std::vector<allocator_schedule::op>& ops = schedule.ops;
  auto first = [&](std::string_view name, bool free) {
    const std::uint32_t t = index_of(inv, name);
    const auto it = std::find_if(ops.begin(), ops.end(), [&](const allocator_schedule::op& o) { return o.tensor == t && o.free == free; });
    REQUIRE(it != ops.end());
    return static_cast<std::size_t>(it - ops.begin());
  };
  // A frozen c_fc reads a bf16 cast of ln_2's output it does not keep: freed once the GEMM's output exists,
  // before peft's lora_A casts the input again (E13's history: the second cast took the first one's block).
  CHECK(first("layer{}.fwd.fc_base_in", true) == first("layer{}.fwd.fc_base_out", false) + 1);
  CHECK(first("layer{}.fwd.fc_base_in", true) < first("layer{}.lora.fc_in", false));
  // gelu_new's steps between pow and tanh: each freed once the next exists, so two are alive at a time.
  CHECK(first("layer{}.fwd.gelu_cube", true) == first("layer{}.fwd.gelu_cube_scaled", false) + 1);
  CHECK(first("layer{}.fwd.gelu_inner_scaled", true) == first("layer{}.mlp.gelu.tanh", false) + 1);
  // c_fc's output (gelu's input) lives until gelu's output exists; that one until c_proj returns.
  CHECK(first("layer{}.fwd.fc_out", true) > first("layer{}.fwd.gelu_out", false));
  CHECK(first("layer{}.fwd.gelu_out", true) > first("layer{}.fwd.mlp_proj_out", false));
  // ln_2's output lives until the layer returns: after the next layer's input (layer 1's ln1.in; layer 0's is
  // not saved under LoRA) is made, with nothing allocated in between.
  const std::size_t output = first("layer{}.ln1.in", false), ln2_out_freed = first("layer{}.fwd.ln2_out", true);
  CHECK(ln2_out_freed > output);
  for (std::size_t i = output + 1; i < ln2_out_freed; ++i) CHECK(ops[i].free);
  // Layer 0's input, which no layer saves here, is freed there too.
  CHECK(first("embed.out", true) > output);
}

TEST_CASE("hf GPT-2 program: the replay makes PyTorch's cuBLAS workspaces, with the default allocator", "[framework][hf][program]") {
  const model_spec& gpt2 = test::data().model("gpt2").spec;
  run_config r = test::gpt2_lora_run();
  const plan_result p = test::plan_of(gpt2, r);
  CHECK(plan_allocator_schedule(p, describe_model(gpt2)).workspace_bytes * 2 == p.overhead.cublas_workspace_bytes);
  // Expandable segments: no recorded history; a coarse forward: free blocks PyTorch did not have.
  r.expandable_segments = true;
  CHECK(plan_allocator_schedule(test::plan_of(gpt2, r), describe_model(gpt2)).workspace_bytes == 0);
  r = test::gpt2_lora_run();
  r.precision = precision_regime::bf16;
  CHECK(plan_allocator_schedule(test::plan_of(gpt2, r), describe_model(gpt2)).workspace_bytes == 0);
}

namespace {

// Walks a schedule: every buffer instance is allocated once, then freed once, in that order; the momentary
// ones (the forward's temporaries) are all freed by the end. A gradient buffer whose parameters' pieces a
// backward step places (allocator_schedule::op::piece) is allocated piece by piece: each piece once, and
// the op for the rest once, all before the free.
void check_made_before_freed(const inventory& inv, const allocator_schedule& schedule) {
  std::vector<char> state(schedule.instances, 0);  // 0 not made, 1 live, 2 freed
  std::set<std::pair<std::uint64_t, std::int32_t>> made;  // (instance, piece) allocated
  std::size_t wrong = 0;
  for (const allocator_schedule::op& o : schedule.ops) {
    const bool twice = !o.free && !made.insert({o.instance, o.piece}).second;
    if (o.free ? state[o.instance] != 1 : state[o.instance] == 2 || twice) {
      ++wrong;
      UNSCOPED_INFO((o.free ? "freed before made: " : "made twice: ") << inv.tensors[o.tensor].name);
    }
    state[o.instance] = o.free ? 2 : 1;
  }
  for (const allocator_schedule::op& o : schedule.ops)
    if (!o.free && inv.tensors[o.tensor].momentary && state[o.instance] != 2) {
      ++wrong;
      UNSCOPED_INFO("never freed: " << inv.tensors[o.tensor].name);
    }
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("hf GPT-2 program: every buffer is made before it is freed, whatever the options", "[framework][hf][program]") {
  // The free points name rows by name; a wrong one (a row before the moment, or in another event) would free a
  // buffer before it exists and keep it for ever after. Every combination the program takes, checkpointed too
  // (where the forward frees what it would save, and the backward's recomputation frees its temporaries).
  const model_spec& gpt2 = test::data().model("gpt2").spec;
  const model_facts facts = describe_model(gpt2);
  const unsigned all_targets = lora_q | lora_k | lora_v | lora_o | lora_mlp;
  int schedules = 0;
  for (precision_regime precision : {precision_regime::amp_bf16, precision_regime::amp_fp16})
    for (double dropout : {0.0, 0.1})
      for (attention_kind attention : {attention_kind::flash, attention_kind::eager})
        for (recompute_mode recompute : {recompute_mode::none, recompute_mode::full})
          for (std::uint64_t accumulation : {1, 3})
            for (int adapters = 0; adapters < 5; ++adapters) {  // 0: full fine-tuning; then LoRA on four target sets
              run_config r = test::run_of(256, 2, recompute, attention, dropout);
              r.profile = &profile_named("hf");
              r.precision = precision;
              r.grad_accum = accumulation;
              if (adapters > 0) {
                r.finetune = finetune_kind::lora;
                r.lora_targets = std::array<unsigned, 4>{all_targets, lora_mlp, lora_o, lora_q | lora_v}[adapters - 1];
              }
              const inventory inv = test::inventory_of(gpt2, r);
              REQUIRE(inv.forward_in_program_order);
              check_made_before_freed(inv, schedule_allocations(inv, facts, accumulation, 2));
              ++schedules;
            }
  CHECK(schedules == 2 * 2 * 2 * 2 * 2 * 5);
}

TEST_CASE("hf Llama program: every buffer is made before it is freed, whatever the options", "[framework][hf][program]") {
  // Llama-family models under autocast: grouped and full attention heads, Qwen2's biases and tied vocabulary,
  // accumulation; each a schedule whose buffers are made, then freed, once.
  int schedules = 0;
  for (const char* name : {"tinyllama-1.1b", "llama-3.2-1b", "qwen2.5-0.5b"}) {
    INFO(name);
    model_spec m = test::data().model(name).spec;
    m.layers = 2;  // the program is per layer; two keep the schedule small
    const model_facts facts = describe_model(m);
    for (precision_regime precision : {precision_regime::amp_bf16, precision_regime::amp_fp16})
      for (std::uint64_t accumulation : {1, 3}) {
        run_config r = test::run_of(256, 2, recompute_mode::none, attention_kind::flash, 0.0);
        r.profile = &profile_named("hf");
        r.precision = precision;
        r.grad_accum = accumulation;
        const inventory inv = test::inventory_of(m, r);
        REQUIRE(inv.forward_in_program_order);
        check_made_before_freed(inv, schedule_allocations(inv, facts, accumulation, 2));
        ++schedules;
      }
  }
  CHECK(schedules == 3 * 2 * 2);
}
