// Mixture of Experts (issue 13): exact total and active counts, FLOPs from the active parameters, the
// experts' activations, capacity factors, expert parallelism per GPU, and the MoE Hugging Face configs.
#include <catch2/catch.hpp>

#include <filesystem>

#include "planner/profiles/registry.hpp"
#include "planner/time/flops.hpp"
#include "planner/io/hf_config.hpp"
#include "planner/util/input_error.hpp"
#include "planner/memory/inventory.hpp"
#include "planner/run/moe.hpp"
#include "planner/run/optimizer.hpp"
#include "planner/model/param_count.hpp"
#include "planner/evaluate/plan.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using trainplan::test::data;
using trainplan::test::hf_fixture;
using trainplan::test::megatron_run;

namespace {

std::uint64_t tensor_bytes(const inventory& inv, std::string_view name) {
  for (const tensor_spec& t : inv.tensors)
    if (t.name == name) return t.bytes;
  return 0;
}

}  // namespace

TEST_CASE("Mixtral 8x7B: 46,702,792,704 parameters, 12,879,925,248 active", "[moe][params]") {
  // L 32, h 4096, 32 heads of 128, 8 kv heads, 8 experts of SwiGLU width 14336, top-2, V 32000, untied.
  constexpr std::uint64_t attention = 4096ull * 4096 + 2 * 4096ull * 1024 + 4096ull * 4096;  // q, k, v, o
  constexpr std::uint64_t expert = 3ull * 4096 * 14336;                                      // gate, up, down
  constexpr std::uint64_t router = 8ull * 4096, norms = 2ull * 4096;
  constexpr std::uint64_t outside = 2ull * 32000 * 4096 + 4096;  // embedding, head, final norm
  constexpr std::uint64_t total = 32 * (attention + 8 * expert + router + norms) + outside;
  constexpr std::uint64_t active = 32 * (attention + 2 * expert + router + norms) + outside;
  static_assert(total == 46'702'792'704ull);   // Jiang et al. 2024: 46.7B
  static_assert(active == 12'879'925'248ull);  // 12.9B active
  const param_counts c = count_params(data().model("mixtral-8x7b").spec);
  CHECK(c.total == total);
  CHECK(c.active == active);
  CHECK(c.routed_experts == 32 * 8 * expert);
  // The GEMM weights one token multiplies by: everything active but the embedding lookup and the norms,
  // the head included.
  CHECK(c.active_matmul == active - 32000ull * 4096 - 32 * norms - 4096);
}

TEST_CASE("Mixtral 8x22B and Qwen3-30B-A3B: exact total and active counts", "[moe][params]") {
  // mixtral-8x22b: L 56, h 6144, 48 heads of 128, 8 kv heads, 8 experts of width 16384, top-2, V 32000.
  constexpr std::uint64_t m_attn = 2 * 6144ull * 6144 + 2 * 6144ull * 1024, m_expert = 3ull * 6144 * 16384;
  constexpr std::uint64_t m_rest = 8ull * 6144 + 2 * 6144, m_outside = 2ull * 32000 * 6144 + 6144;
  constexpr std::uint64_t m_total = 56 * (m_attn + 8 * m_expert + m_rest) + m_outside;
  constexpr std::uint64_t m_active = 56 * (m_attn + 2 * m_expert + m_rest) + m_outside;
  static_assert(m_total == 140'620'634'112ull);  // Mistral AI: 141B
  static_assert(m_active == 39'152'031'744ull);  // 39B active
  const param_counts m = count_params(data().model("mixtral-8x22b").spec);
  CHECK(m.total == m_total);
  CHECK(m.active == m_active);

  // qwen3-30b-a3b: L 48, h 2048, 32 heads x head_dim 128 = 4096 (not h), 4 kv heads, q/k RMSNorm (128 each),
  // 128 experts of width 768, top-8, V 151936, untied.
  constexpr std::uint64_t q_attn = 2048ull * 4096 + 2 * 2048ull * 512 + 4096ull * 2048 + 2 * 128;
  constexpr std::uint64_t q_expert = 3ull * 2048 * 768, q_rest = 128ull * 2048 + 2 * 2048;
  constexpr std::uint64_t q_outside = 2ull * 151936 * 2048 + 2048;
  constexpr std::uint64_t q_total = 48 * (q_attn + 128 * q_expert + q_rest) + q_outside;
  constexpr std::uint64_t q_active = 48 * (q_attn + 8 * q_expert + q_rest) + q_outside;
  static_assert(q_total == 30'532'122'624ull);  // model card: 30.5B
  static_assert(q_active == 3'353'032'704ull);  // model card: 3.3B activated
  const param_counts q = count_params(data().model("qwen3-30b-a3b").spec);
  CHECK(q.total == q_total);
  CHECK(q.active == q_active);
}

TEST_CASE("MoE FLOPs: 6 x the active GEMM weights plus attention, and 6N uses the active count", "[moe][flops]") {
  const model_spec& m = data().model("mixtral-8x7b").spec;
  const param_counts c = count_params(m);
  run_config r = megatron_run(4096);
  const step_flops f = count_flops(m, r, c, profile_of(r).traits);
  const double tokens = 4096;
  const double attention_per_token = 4.0 * 32 * 4096 * 4096;  // 4 L s (heads x head_dim)
  CHECK(f.model_per_step == Approx(3.0 * (2.0 * double(c.active_matmul) + attention_per_token) * tokens).epsilon(1e-12));
  CHECK(f.six_n_per_step == Approx(6.0 * 12'879'925'248.0 * tokens).epsilon(1e-12));
  // A dense model of the same shape with one expert's MLP is the same but for the experts' GEMMs.
  model_spec one = m;
  one.experts = 0, one.experts_per_token = 0;
  const param_counts dense = count_params(one);
  CHECK(c.active_matmul == dense.matmul + 32 * (4096ull * 14336 * 3 + 8 * 4096));  // a second expert and the router
}

TEST_CASE("MoE activations per layer, by hand: router, routed rows, experts' SwiGLU", "[moe][memory]") {
  // Megatron-style inventory, bf16 activations, flash attention, no recomputation, b 1, s 4096:
  // T = 4096 tokens, R = 2 x 4096 routed rows (dropless).
  const model_spec& m = data().model("mixtral-8x7b").spec;
  run_config r = megatron_run(4096);
  const inventory inv = build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype));
  const std::uint64_t T = 4096, R = 8192, h = 4096, f = 14336;
  const std::uint64_t attention_part = 2 * T * h * 2      // ln1.in, attn.qkv_in
                                       + 2 * T * 6144     // qkv: q 4096 + k 1024 + v 1024
                                       + 4 * 32 * T       // lse, fp32
                                       + 2 * T * 4096     // attn.out_in
                                       + 2 * T * h * 2;   // ln2.in, mlp.fc_in
  const std::uint64_t router_part = 4 * T * 8 + 8 * T * 2 + 4 * T * 2;  // fp32 probs, i64 indices, fp32 weights
  const std::uint64_t expert_part = 2 * R * h + 3 * 2 * R * f + 2 * R * h;  // permuted in, gate/up/down_in, out
  CHECK(inv.activations_per_layer_bytes == attention_part + router_part + expert_part);
  CHECK(tensor_bytes(inv, "layer{}.mlp.gate") == 2 * R * f);
  CHECK(routed_rows(m, r) == R);
  // Backward, reused by every layer: d_gate and d_up over the rows (wider than d(attn.out_in), T x 4096), and
  // the rows' own gradient, of the expert outputs and then of the permuted inputs (what the harness runs).
  CHECK(tensor_bytes(inv, "bwd.d_ffn") == 2 * R * 2 * f);
  CHECK(tensor_bytes(inv, "bwd.d_expert_rows") == 2 * R * h);

  // Capacity factor 1.25: each of the 8 experts takes ceil(1.25 x 8192 / 8) = 1280 rows, padded.
  r.capacity_factor = 1.25;
  CHECK(routed_rows(m, r) == 8 * 1280);
  const inventory padded = build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype));
  CHECK(tensor_bytes(padded, "layer{}.mlp.gate") == 2 * 10240 * f);
}

TEST_CASE("expert parallelism: per-GPU model state by hand (--gpus 8 --ep 8 --zero 1)", "[moe][ep]") {
  const model_spec& m = data().model("mixtral-8x7b").spec;
  const param_counts c = count_params(m);
  run_config r = megatron_run(4096);
  r.gpus = 8;
  r.zero = 1;
  const std::uint64_t experts = c.routed_experts, rest = c.total - experts;  // 45,097,156,608 and 1,605,636,096
  auto state = [&](const inventory& inv, std::string_view name) { return tensor_bytes(inv, name); };
  const inventory no_ep = build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype));
  r.ep = 8;
  const inventory ep8 = build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype));
  // bf16 weights and fp32 gradients are not sharded under ZeRO-1: every other weight, and 1 of 8 experts.
  CHECK(state(no_ep, "weights.bf16") == 2 * c.total);
  CHECK(state(ep8, "weights.bf16") == 2 * (rest + experts / 8));
  CHECK(state(ep8, "grads.fp32") == 4 * (rest + experts / 8));
  // Master weights and Adam moments are sharded over the 8 data-parallel GPUs either way: 1/8 of the model.
  CHECK(state(ep8, "master.fp32") == 4 * ((c.total + 7) / 8));
  CHECK(state(ep8, "adam.m") == state(no_ep, "adam.m"));
  // Without ZeRO the Adam moments hold 1/8 of the experts too.
  r.zero = 0;
  const inventory ep8_ddp = build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype));
  CHECK(state(ep8_ddp, "adam.m") == 4 * (rest + experts / 8));
  // With pipeline stages too: each stage holds its layers' share of the experts, 1/ep of it.
  run_config staged = megatron_run(4096);
  staged.gpus = 16, staged.pp = 2, staged.zero = 1;
  const gpu_spec& h100 = data().gpu("h100");
  auto stage_weights = [&](const run_config& x) {
    for (const tensor_spec& t : evaluate_plan(m, x, h100, data().calibration_for(h100)).inv.tensors)
      if (t.name == "weights.bf16") return t.bytes;
    return std::uint64_t{0};
  };
  const std::uint64_t without_ep = stage_weights(staged);
  staged.ep = 8;
  const std::uint64_t with_ep = stage_weights(staged);
  CHECK(without_ep - with_ep == 2 * (experts / 2 - experts / 2 / 8));  // half the layers, 7/8 of their experts
  // The all-to-all buffers: a send and a receive of R rows in the layer's forward and backward.
  CHECK(state(ep8, "layer{}.moe.all_to_all") == 2 * 2 * 8192 * 4096);
}

TEST_CASE("MoE options are checked: top-k, --ep, --capacity-factor, frameworks", "[moe][errors]") {
  const model_spec& mixtral = data().model("mixtral-8x7b").spec;
  const gpu_spec& gpu = data().gpu("h100");
  const calibration cal = data().calibration_for(gpu);
  model_spec bad = mixtral;
  bad.experts_per_token = 9;
  CHECK_THROWS_WITH(validate_model(bad), Catch::Contains("experts_per_token"));
  run_config r = megatron_run(1024);
  r.gpus = 8, r.ep = 3;
  CHECK_THROWS_WITH(evaluate_plan(mixtral, r, gpu, cal), Catch::Contains("--ep 3 must divide the 8 experts"));
  r.gpus = 4, r.ep = 8;
  CHECK_THROWS_WITH(evaluate_plan(mixtral, r, gpu, cal), Catch::Contains("data-parallel"));
  r = megatron_run(1024);
  r.capacity_factor = 1.25;
  CHECK_THROWS_WITH(evaluate_plan(data().model("llama-2-7b").spec, r, gpu, cal), Catch::Contains("Mixture-of-Experts"));
  run_config hf;
  hf.profile = &profile_named("hf");
  hf.precision = precision_regime::amp_bf16;
  hf.seq = 1024, hf.gpus = 8, hf.ep = 8;
  CHECK_THROWS_WITH(evaluate_plan(mixtral, hf, gpu, cal), Catch::Contains("megatron"));
}

TEST_CASE("Adafactor factors a stack of expert matrices over its last two dims", "[moe][optimizer]") {
  // [E, r, c] keeps E*r row and E*c column statistics (HF Adafactor), not E*r + c.
  const std::vector<param_tensor> experts{{"layer{}.moe.experts.up.weight", {8, 14336, 4096}, 8ull * 14336 * 4096, true, true, 0, true}};
  const optimizer_state_buffers st = optimizer_state(optimizer_kind::adafactor, experts, layer_counts(1), dtype::fp32);
  REQUIRE(st.size() == 1);
  CHECK(st.begin()->bytes == 4 * (8ull * 14336 + 8ull * 4096));
}

TEST_CASE("mixtral, qwen3_moe and qwen2_moe configs read as their models", "[moe][hf-config]") {
  model_spec mixtral = model_from_hf_config(hf_fixture("mixtral-8x7b.json"));
  mixtral.name = "mixtral-8x7b", mixtral.source = data().model("mixtral-8x7b").spec.source;
  CHECK(mixtral == data().model("mixtral-8x7b").spec);
  model_spec qwen3 = model_from_hf_config(hf_fixture("qwen3-30b-a3b.json"));
  qwen3.name = "qwen3-30b-a3b", qwen3.source = data().model("qwen3-30b-a3b").spec.source;
  CHECK(qwen3 == data().model("qwen3-30b-a3b").spec);
  // Qwen1.5-MoE-A2.7B: L 24, h 2048, 16 heads (MHA, q/k/v biases), 60 experts of width 1408, top-4, a
  // shared expert of width 5632 with its sigmoid gate (1, h), V 151936, untied.
  const model_spec q2 = model_from_hf_config(hf_fixture("qwen1.5-moe-a2.7b.json"));
  CHECK(q2.shared_expert_ffn == 5632);
  constexpr std::uint64_t attn = 4 * 2048ull * 2048 + 3 * 2048, shared = 3ull * 2048 * 5632 + 2048;
  constexpr std::uint64_t expert = 3ull * 2048 * 1408, rest = 60ull * 2048 + 2 * 2048;
  constexpr std::uint64_t outside = 2ull * 151936 * 2048 + 2048;
  constexpr std::uint64_t total = 24 * (attn + 60 * expert + shared + rest) + outside;
  static_assert(total == 14'315'784'192ull);  // model card: 14.3B
  const param_counts c = count_params(q2);
  CHECK(c.total == total);
  CHECK(c.active == 24 * (attn + 4 * expert + shared + rest) + outside);  // 2,689,173,504: the card's 2.7B

  // Dense layers among the MoE layers cannot be described: refused with the key named.
  const std::string base = R"({"model_type": "qwen3_moe", "num_hidden_layers": 4, "hidden_size": 64,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128,
    "moe_intermediate_size": 32, "num_experts": 8, "num_experts_per_tok": 2, "vocab_size": 100)";
  CHECK_NOTHROW(model_from_hf_config_text(base + "}", "ok.json"));
  CHECK_THROWS_WITH(model_from_hf_config_text(base + R"(, "mlp_only_layers": [0]})", "x.json"),
                    Catch::Contains("x.json") && Catch::Contains("mlp_only_layers"));
  CHECK_THROWS_WITH(model_from_hf_config_text(base + R"(, "decoder_sparse_step": 2})", "x.json"),
                    Catch::Contains("decoder_sparse_step"));
  CHECK_THROWS_WITH(model_from_hf_config_text(base + R"(, "num_experts_per_tok": 9})", "x.json"),
                    Catch::Contains("experts_per_token"));
  CHECK_THROWS_WITH(model_from_hf_config_text(R"({"model_type": "mixtral", "num_hidden_layers": 2, "hidden_size": 64,
    "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "num_experts_per_tok": 2})", "m.json"),
                    Catch::Contains("num_local_experts"));
}
