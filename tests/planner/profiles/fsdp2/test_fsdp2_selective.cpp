// --recompute selective under --framework fsdp2: torchtitan's per-op policy (planner/run/selective_checkpoint.hpp)
// over the hf profile's Llama layer, against hand derivations. The policy (torchtitan's SelectiveAC over
// torch.utils.checkpoint's create_selective_checkpoint_contexts) keeps the outputs of aten.mm calls 1, 3, 5 and 7
// of a layer (q_proj, v_proj, gate_proj, down_proj in LlamaAttention's and LlamaMLP's order) and of SDPA (its
// output and fp32 log-sum-exp); the checkpoint keeps the layer's input; the rest is recomputed in the layer's
// backward.
#include <catch2/catch.hpp>

#include "planner/evaluate/plan.hpp"
#include "planner/memory/timeline.hpp"
#include "planner/model/param_count.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/time/flops.hpp"
#include "planner/util/input_error.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;

namespace {

// A small Llama: 4 layers, h 512, 8 query heads and 2 key-value heads of 64, SwiGLU 1376, vocabulary 1000.
constexpr std::uint64_t L = 4, h = 512, a = 8, kv = 2, d = 64, f = 1376, b = 2, s = 256;

model_spec small_llama() {
  model_spec m = test::tiny_model(model_family::llama, 1000);
  m.name = "small-llama";
  m.layers = L;
  m.hidden = h;
  m.heads = a;
  m.kv_heads = kv;
  m.head_dim = d;
  m.ffn = f;
  return m;
}

run_config fsdp2_run(recompute_mode rc) {
  run_config r = test::run_of(s, b, rc, attention_kind::flash, 0.0);
  r.profile = &profile_named("fsdp2");
  r.precision = precision_regime::bf16_mixed;  // bf16 compute: 2-byte activations
  r.gpus = 2;
  r.zero = 3;
  return r;
}

precision_layout layout_of(const run_config& r) { return make_precision_layout(r.precision, r.grad_dtype); }

// The bytes of the layers' activations live during event `e` (every layer's instances), FSDP's buffers apart.
std::uint64_t layer_activations_live(const inventory& inv, std::int64_t e) {
  std::uint64_t bytes = 0;
  for (const tensor_spec& t : inv.tensors) {
    const std::string_view name(t.name);
    if (t.category == tensor_category::activations && t.lifetime == state_lifetime::micro_batch &&
        name.starts_with("layer{}.") && !name.starts_with("layer{}.fsdp"))
      bytes += instances_live(t, e) * t.bytes;
  }
  return bytes;
}

double gemm_flops(const step_ops& ops) {
  double sum = 0;
  for (const step_op& op : ops.ops)
    if (op.cls == op_class::gemm) sum += op.flops;
  return sum;
}

double attention_flops(const step_ops& ops) {
  double sum = 0;
  for (const step_op& op : ops.ops)
    if (op.cls == op_class::attention) sum += op.flops;
  return sum;
}

}  // namespace

TEST_CASE("fsdp2 selective: a layer keeps its input and the outputs of q, v, gate, down and SDPA", "[unit][fsdp2]") {
  const model_spec m = small_llama();
  const run_config r = fsdp2_run(recompute_mode::selective);
  const inventory inv = build_inventory(m, r, layout_of(r));
  // Held from each layer's forward to its backward, by hand (bf16: 2 bytes; the log-sum-exp fp32):
  const std::uint64_t input = b * s * h * 2;          // the checkpoint's layer input, [b, s, h]
  const std::uint64_t q_out = b * s * a * d * 2;      // q_proj's output, [b, s, a d]
  const std::uint64_t v_out = b * s * kv * d * 2;     // v_proj's output, [b, s, kv d]
  const std::uint64_t gate_out = b * s * f * 2;       // gate_proj's output, [b, s, f]
  const std::uint64_t down_out = b * s * h * 2;       // down_proj's output, [b, s, h]
  const std::uint64_t sdpa_out = b * s * a * d * 2;   // SDPA's output, [b, a, s, d]
  const std::uint64_t sdpa_lse = b * a * s * 4;       // its log-sum-exp, [b, a, s] fp32
  const std::uint64_t per_layer = input + q_out + v_out + gate_out + down_out + sdpa_out + sdpa_lse;
  const std::int64_t loss = event_index(event_kind::loss, 0, static_cast<std::int64_t>(L));
  CHECK(layer_activations_live(inv, loss) == L * per_layer);
  // By name: the kept outputs are the rows of q_proj, v_proj (what SDPA reads), gate_proj, down_proj and SDPA...
  for (const char* kept : {"layer{}.fwd.q_out", "layer{}.attn.v", "layer{}.mlp.gate", "layer{}.fwd.down_out",
                           "layer{}.attn.out_in", "layer{}.attn.lse"}) {
    INFO(kept);
    const tensor_spec* t = test::tensor_named(inv, kept);
    REQUIRE(t != nullptr);
    CHECK(instances_live(*t, loss) == L);
  }
  // ...and the even calls' (k_proj, o_proj, up_proj) are made again in the backward, as under full recomputation.
  for (const char* recomputed : {"layer{}.fwd.k_out", "layer{}.fwd.attn_proj_out", "layer{}.mlp.up"}) {
    INFO(recomputed);
    const tensor_spec* t = test::tensor_named(inv, recomputed);
    REQUIRE(t != nullptr);
    CHECK(instances_live(*t, loss) == 0);
  }
  // Full recomputation keeps the input alone; none more than the policy.
  const run_config full = fsdp2_run(recompute_mode::full), none = fsdp2_run(recompute_mode::none);
  CHECK(layer_activations_live(build_inventory(m, full, layout_of(full)), loss) == L * input);
  CHECK(layer_activations_live(build_inventory(m, none, layout_of(none)), loss) > L * per_layer);
}

TEST_CASE("fsdp2 selective: the peak lies between full recomputation's and none's", "[unit][fsdp2]") {
  const model_spec m = small_llama();
  const gpu_spec& gpu = test::data().gpu("h100");
  auto peak = [&](recompute_mode rc) {
    return evaluate_plan(m, fsdp2_run(rc), gpu, test::data().calibration_for(gpu)).tensor_peak_bytes;
  };
  const std::uint64_t none = peak(recompute_mode::none), selective = peak(recompute_mode::selective),
                      full = peak(recompute_mode::full);
  CHECK(full < selective);
  CHECK(selective < none);
}

TEST_CASE("fsdp2 selective: the recomputed FLOPs are the even matmuls' forward GEMMs", "[unit][fsdp2]") {
  const model_spec m = small_llama();
  const stack_profile& fsdp2 = profile_named("fsdp2");
  const run_config selective = fsdp2_run(recompute_mode::selective), none = fsdp2_run(recompute_mode::none);
  // k_proj (h x kv d), o_proj (a d x h) and up_proj (h x f), 2 m n k each over the micro-batch's tokens, every layer.
  const double T = b * s;
  const double recomputed_gemms = 2 * T * (h * kv * d + a * d * h + h * f) * L;
  // SDPA's flash kernels recompute the s x s scores in their backward whatever the mode (planner/time/flops.hpp):
  // QK^T and PV, 2 x s x (a d + a d) a token per layer, the full square.
  const double flash_backward = 2.0 * s * (a * d + a * d) * T * L;
  const step_flops counted = count_flops(m, selective, count_params(m), fsdp2.traits);
  CHECK(counted.recompute_per_step == Approx(recomputed_gemms + flash_backward).epsilon(1e-12));
  CHECK(count_flops(m, none, count_params(m), fsdp2.traits).recompute_per_step == Approx(flash_backward).epsilon(1e-12));
  // The step's operations: the GEMMs rerun are those three, nothing of attention (its output is kept).
  const step_ops with = fsdp2.micro_batch_ops(m, selective, layout_of(selective), trained_share{});
  const step_ops without = fsdp2.micro_batch_ops(m, none, layout_of(none), trained_share{});
  CHECK(gemm_flops(with) - gemm_flops(without) == Approx(recomputed_gemms).epsilon(1e-12));
  CHECK(attention_flops(with) == Approx(attention_flops(without)).epsilon(1e-12));
  CHECK(with.launches.recompute > 0);
  CHECK(without.launches.recompute == 0);
}

TEST_CASE("fsdp2 selective: layers whose matmuls the policy is not modelled for are refused", "[unit][fsdp2]") {
  const gpu_spec& gpu = test::data().gpu("h100");
  auto refusal = [&](const model_spec& m, run_config r) -> std::string {
    try {
      evaluate_plan(m, r, gpu, test::data().calibration_for(gpu));
    } catch (const input_error& e) {
      return e.what();
    }
    return "";
  };
  const run_config r = fsdp2_run(recompute_mode::selective);
  CHECK_THAT(refusal(test::data().model("gpt2").spec, r), Catch::Contains("--recompute selective") && Catch::Contains("Conv1D"));
  model_spec biased = small_llama();
  biased.qkv_bias = true;
  CHECK_THAT(refusal(biased, r), Catch::Contains("--recompute selective") && Catch::Contains("biases"));
  model_spec fused = small_llama();
  fused.fused_projections = true;
  CHECK_THAT(refusal(fused, r), Catch::Contains("--recompute selective") && Catch::Contains("fused"));
  run_config eager = r;
  eager.attention = attention_kind::eager;
  CHECK_THAT(refusal(small_llama(), eager), Catch::Contains("--recompute selective") && Catch::Contains("eager"));
  // The hf profile still checkpoints whole layers only.
  run_config hf = r;
  hf.profile = &profile_named("hf");
  hf.gpus = 1;
  hf.zero = 0;
  CHECK_THAT(refusal(small_llama(), hf), Catch::Contains("--framework hf checkpoints whole decoder layers"));
}
