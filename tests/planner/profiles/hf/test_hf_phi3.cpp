// --framework hf on Phi-3's fused projections (transformers' Phi3Attention: one qkv_proj sliced into q, k and
// v views; Phi3MLP: one gate_up_proj chunked into gate and up), from the source; no GPU run of it is shared.
// Each case sets Phi-3 beside a Llama of the same shape with separate projections.
#include <catch2/catch.hpp>

#include "planner/run/lora.hpp"
#include "planner/profiles/hf/hf_profile.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/evaluate/plan.hpp"
#include "tests/support/plan_helpers.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;

namespace {

using test::inventory_of;
using test::plan_of;
using test::tensor_named;

model_spec phi3() {
  const model_spec& m = test::data().model("phi-3-mini").spec;
  REQUIRE(m.fused_projections);
  return m;
}

model_spec unfused(model_spec m) {
  m.fused_projections = false;
  return m;
}

run_config hf_run(std::uint64_t seq, precision_regime p) {
  run_config r = test::run_of(seq, 1, recompute_mode::none, attention_kind::flash, 0.0);
  r.profile = &profile_named("hf");
  r.precision = p;
  return r;
}

std::vector<std::uint64_t> shape_of(const inventory& inv, std::string_view name) {
  const tensor_spec* t = tensor_named(inv, name);
  return t ? t->shape.to_vector() : std::vector<std::uint64_t>{};
}

}  // namespace

TEST_CASE("hf Phi-3: one cast of each norm output, SDPA's values keep all of qkv_proj's output", "[framework][hf][phi3]") {
  const model_spec m = phi3();
  const std::uint64_t h = m.hidden, s = 1024, qkv = m.qkv_width(), f = m.ffn;
  // Under autocast each linear casts the fp32 norm output it reads: once for qkv_proj (Llama: q, k, v),
  // once for gate_up_proj (Llama: gate, up).
  const inventory amp = inventory_of(m, hf_run(s, precision_regime::amp_bf16));
  CHECK(shape_of(amp, "layer{}.attn.qkv_in") == std::vector<std::uint64_t>{1, 1, s, h});
  CHECK(shape_of(amp, "layer{}.mlp.fc_in") == std::vector<std::uint64_t>{1, 1, s, h});
  // Llama's q, k, v and gate, up each cast it: as the forward runs them, one buffer each (op by op, with or
  // without checkpointing), or as one [3] and one [2] buffer where the forward is coarse (LoRA).
  const inventory llama_amp = inventory_of(unfused(m), hf_run(s, precision_regime::amp_bf16));
  for (const char* cast : {"layer{}.attn.q_in", "layer{}.attn.k_in", "layer{}.attn.v_in", "layer{}.mlp.gate_in", "layer{}.mlp.up_in"})
    CHECK(shape_of(llama_amp, cast) == std::vector<std::uint64_t>{1, s, h});
  run_config coarse = hf_run(s, precision_regime::amp_bf16);
  coarse.finetune = finetune_kind::lora;
  coarse.lora_targets = lora_q | lora_k | lora_v | lora_o | lora_mlp;
  coarse.recompute = recompute_mode::full;  // (every linear trains an adapter, so each saves its input)
  const inventory llama_amp_coarse = inventory_of(unfused(m), coarse);
  CHECK_FALSE(llama_amp_coarse.forward_in_program_order);
  CHECK(shape_of(llama_amp_coarse, "layer{}.lora.qkv_in") == std::vector<std::uint64_t>{3, 1, s, h});
  CHECK(shape_of(llama_amp_coarse, "layer{}.lora.fc_in") == std::vector<std::uint64_t>{2, 1, s, h});
  // SDPA saves v as a view of qkv_proj's output (no repeat_kv below the window: is_causal): all of it kept.
  const inventory bf16 = inventory_of(m, hf_run(s, precision_regime::bf16));
  CHECK(shape_of(bf16, "layer{}.attn.qkv") == std::vector<std::uint64_t>{1, s, qkv});
  CHECK_FALSE(tensor_named(bf16, "layer{}.attn.v"));
  CHECK(shape_of(inventory_of(unfused(m), hf_run(s, precision_regime::bf16)), "layer{}.attn.v") ==
        std::vector<std::uint64_t>{1, m.kv_heads, s, m.head_dim});
  // silu and the product save views of gate_up_proj's one [b, s, 2f] output instead of gate and up.
  CHECK(shape_of(bf16, "layer{}.mlp.gate_up") == std::vector<std::uint64_t>{1, s, 2 * f});
  CHECK_FALSE(tensor_named(bf16, "layer{}.mlp.gate"));
  CHECK_FALSE(tensor_named(bf16, "layer{}.mlp.up"));
  // Eager attention saves its own contiguous copy of the values, fused or not.
  run_config eager = hf_run(s, precision_regime::bf16);
  eager.attention = attention_kind::eager;
  const inventory phi_eager = inventory_of(m, eager);
  CHECK(tensor_named(phi_eager, "layer{}.attn.v_rep"));
  CHECK_FALSE(tensor_named(phi_eager, "layer{}.attn.qkv"));
  // At the window (2047 tokens) transformers builds the mask and repeat_kv returns the view for equal heads:
  // still all of qkv_proj's output. With grouped heads the values are repeated copies of their own.
  CHECK(shape_of(inventory_of(m, hf_run(4096, precision_regime::bf16)), "layer{}.attn.qkv") ==
        std::vector<std::uint64_t>{1, 4096, qkv});
  model_spec grouped = m;
  grouped.kv_heads = m.heads / 4;
  const inventory gqa = inventory_of(grouped, hf_run(4096, precision_regime::bf16));
  CHECK_FALSE(tensor_named(gqa, "layer{}.attn.qkv"));
  CHECK(shape_of(gqa, "layer{}.attn.v") == std::vector<std::uint64_t>{1, m.heads, 4096, m.head_dim});
}

TEST_CASE("hf Phi-3: one GEMM per fused projection in the step, and LoRA adapts each fused module once", "[framework][hf][phi3][lora]") {
  const model_spec m = phi3();
  const plan_result fused = plan_of(m, hf_run(1024, precision_regime::bf16));
  const plan_result separate = plan_of(unfused(m), hf_run(1024, precision_regime::bf16));
  auto ops_named = [](const plan_result& p, std::string_view name) {
    int n = 0;
    for (const step_op& op : p.ops.ops) n += op.name == name;
    return n;
  };
  CHECK(ops_named(fused, "attention.qkv_proj") == 1);
  CHECK(ops_named(fused, "attention.q_proj") == 0);
  CHECK(ops_named(fused, "mlp.gate_up_proj") == 1);
  CHECK(ops_named(separate, "attention.q_proj") == 1);
  // The same FLOPs either way: the fused GEMMs hold the same weights.
  CHECK(fused.flops.model_per_step == Approx(separate.flops.model_per_step).epsilon(1e-12));

  // peft adapts qkv_proj (naming any of q, k, v) and gate_up_proj as one module each: rank x (in + out).
  const std::uint64_t h = m.hidden, f = m.ffn, L = m.layers, r = 16;
  CHECK(lora_params(m, r, lora_q, hf_traits) == r * L * (h + m.qkv_width()));
  CHECK(lora_params(m, r, lora_q | lora_k | lora_v | lora_o | lora_mlp, hf_traits) ==
        r * L * ((h + m.qkv_width()) + (m.q_width() + h) + (h + 2 * f) + (f + h)));
  CHECK(lora_linears(m, lora_q | lora_k | lora_v | lora_o | lora_mlp, hf_traits) == 4);
  // Only peft on the Hugging Face model fuses them: the other frameworks keep their separate projections.
  CHECK(lora_params(m, r, lora_q, profile_named("trainplan").traits) == lora_params(unfused(m), r, lora_q, profile_named("trainplan").traits));
  CHECK(lora_linears(m, lora_q | lora_k | lora_v | lora_o | lora_mlp, profile_named("megatron").traits) == 7);
  CHECK(lora_linears(unfused(m), lora_q | lora_k | lora_v | lora_o | lora_mlp, hf_traits) == 7);
  // lora_A saves one fp32 copy of the norm output for qkv_proj (Llama: one per adapted q, k, v).
  run_config lora = hf_run(1024, precision_regime::bf16);
  lora.finetune = finetune_kind::lora;
  lora.lora_targets = lora_q | lora_k | lora_v | lora_o | lora_mlp;
  CHECK(shape_of(inventory_of(m, lora), "layer{}.lora.qkv_in") == std::vector<std::uint64_t>{1, 1, 1024, h});
  CHECK(shape_of(inventory_of(unfused(m), lora), "layer{}.lora.qkv_in") == std::vector<std::uint64_t>{3, 1, 1024, h});
  CHECK(shape_of(inventory_of(m, lora), "layer{}.lora.fc_in") == std::vector<std::uint64_t>{1, 1, 1024, h});
}
