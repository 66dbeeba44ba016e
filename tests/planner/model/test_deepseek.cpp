// DeepSeek-V2/V3 (issue 13): multi-head latent attention, dense first layers before the MoE layers, ungated
// shared experts and the routing bias: exact counts, FLOPs, activations by hand, layer ranges in the
// timeline and the allocator replay, pipeline stages of mixed layers, and the deepseek_v2/v3 configs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include "planner/model/model_facts.hpp"
#include "planner/profiles/hf/hf_profile.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/allocator/allocator_trace.hpp"
#include "planner/time/flops.hpp"
#include "planner/io/hf_config.hpp"
#include "planner/util/input_error.hpp"
#include "planner/memory/inventory.hpp"
#include "planner/run/lora.hpp"
#include "planner/model/param_count.hpp"
#include "planner/evaluate/plan.hpp"
#include "planner/memory/timeline.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using trainplan::test::data;
using trainplan::test::hf_fixture;
using trainplan::test::megatron_run;

namespace {

const tensor_spec* find(const inventory& inv, std::string_view name, std::uint32_t layer = 0) {
  for (const tensor_spec& t : inv.tensors)
    if (t.name == name && (!t.per_layer || (t.layer_begin <= layer && layer < t.layer_end))) return &t;
  return nullptr;
}

// A DeepSeek-shaped toy: 6 layers, the first 2 dense (width 96), then MoE layers of 8 experts of width 32,
// top-2, one ungated shared expert; MLA with a q latent of 24, a kv latent of 16, 4 heads of 12 (RoPE 4)
// and values of 8.
model_spec toy_deepseek() {
  model_spec m;
  m.name = "toy-deepseek";
  m.family = model_family::llama;
  m.layers = 6, m.hidden = 32, m.heads = m.kv_heads = 4, m.head_dim = 12, m.ffn = 32, m.vocab = 64;
  m.experts = 8, m.experts_per_token = 2, m.shared_expert_ffn = 32, m.shared_expert_gate = false;
  m.dense_layers = 2, m.dense_ffn = 96, m.router_score_bias = true;
  m.kv_lora_rank = 16, m.q_lora_rank = 24, m.rope_head_dim = 4, m.v_head_dim = 8;
  return m;
}

}  // namespace

TEST_CASE("DeepSeek-V3: 671,026,404,352 parameters, 37,552,282,624 active", "[deepseek][params]") {
  // L 61 (3 dense, 58 MoE), h 7168, 128 heads. MLA: q_a (1536, h), q_a_norm 1536, q_b (128 x 192, 1536);
  // kv_a (512 + 64, h), kv_a_norm 512, kv_b (128 x (128 + 128), 512); o (h, 128 x 128).
  constexpr std::uint64_t h = 7168;
  constexpr std::uint64_t attention = 1536 * h + 1536 + 128ull * 192 * 1536 + 576 * h + 512 + 128ull * 256 * 512 +
                                      h * 128 * 128;
  constexpr std::uint64_t norms = 2 * h, dense_mlp = 3 * h * 18432, expert = 3 * h * 2048, router = 256 * h;
  constexpr std::uint64_t outside = 2ull * 129280 * h + h;  // embedding, head, final norm
  constexpr std::uint64_t dense_layer = attention + norms + dense_mlp;
  constexpr std::uint64_t moe_layer = attention + norms + router + 256 * expert + expert;  // + 1 shared expert
  constexpr std::uint64_t moe_layer_active = attention + norms + router + 8 * expert + expert;
  constexpr std::uint64_t total = 3 * dense_layer + 58 * moe_layer + outside;
  constexpr std::uint64_t active = 3 * dense_layer + 58 * moe_layer_active + outside;
  static_assert(total == 671'026'404'352ull);  // "671B total"; the 58 x 256 routing biases are a buffer
  static_assert(active == 37'552'282'624ull);  // "37B activated"
  const param_counts c = count_params(data().model("deepseek-v3").spec);
  CHECK(c.total == total);
  CHECK(c.active == active);
  CHECK(c.per_layer == moe_layer);
  CHECK(c.per_dense_layer == dense_layer);
  CHECK(c.layers_total == 3 * dense_layer + 58 * moe_layer);
  CHECK(c.routed_experts == 58 * 256 * expert);
  CHECK(c.routed_experts_per_layer == 256 * expert);
  CHECK(c.matmul_layers_total == c.layers_total - 61 * norms - 61 * (1536 + 512));
  // Each per-layer tensor sits in every layer, the dense ones or the MoE ones.
  for (const param_tensor& p : param_tensors(data().model("deepseek-v3").spec)) {
    INFO(p.name);
    if (p.name.starts_with("layer{}.mlp.")) CHECK(p.in_layers == layer_set::dense);
    else if (p.name.starts_with("layer{}.moe.")) CHECK(p.in_layers == layer_set::moe);
    else CHECK(p.in_layers == layer_set::all);
  }
}

TEST_CASE("deepseek_v3 and deepseek_v2 configs read as their models", "[deepseek][hf-config]") {
  model_spec v3 = model_from_hf_config(hf_fixture("deepseek-v3.json"));
  v3.name = "deepseek-v3", v3.source = data().model("deepseek-v3").spec.source;
  CHECK(v3 == data().model("deepseek-v3").spec);
  // DeepSeek-V2-Lite: L 27 (1 dense of 10944), h 2048, 16 heads; no q latent (q_proj (16 x 192, h)); kv_a
  // (576, h), kv_b (16 x 256, 512), o (h, 16 x 128); 64 experts of 1408, top-6, 2 shared (one MLP of 2816),
  // softmax routing (no score bias), V 102400, untied.
  const model_spec lite = model_from_hf_config(hf_fixture("deepseek-v2-lite.json"));
  CHECK(lite.q_lora_rank == 0);
  CHECK(lite.shared_expert_ffn == 2816);
  CHECK_FALSE(lite.router_score_bias);
  constexpr std::uint64_t h = 2048;
  constexpr std::uint64_t attention = 16ull * 192 * h + 576 * h + 512 + 16ull * 256 * 512 + h * 16 * 128;
  constexpr std::uint64_t norms = 2 * h, expert = 3 * h * 1408, shared = 3 * h * 2816, router = 64 * h;
  constexpr std::uint64_t dense_layer = attention + norms + 3 * h * 10944;
  constexpr std::uint64_t outside = 2ull * 102400 * h + h;
  constexpr std::uint64_t total = dense_layer + 26 * (attention + norms + router + 64 * expert + shared) + outside;
  static_assert(total == 15'706'484'224ull);  // model card: 15.7B
  const param_counts c = count_params(lite);
  CHECK(c.total == total);
  CHECK(c.active == dense_layer + 26 * (attention + norms + router + 6 * expert + shared) + outside);

  const std::string base = R"({"model_type": "deepseek_v3", "num_hidden_layers": 4, "hidden_size": 64,
    "num_attention_heads": 4, "intermediate_size": 128, "moe_intermediate_size": 32, "n_routed_experts": 8,
    "num_experts_per_tok": 2, "n_shared_experts": 1, "first_k_dense_replace": 1, "kv_lora_rank": 16,
    "q_lora_rank": 24, "qk_nope_head_dim": 12, "qk_rope_head_dim": 4, "v_head_dim": 8, "vocab_size": 100)";
  CHECK_NOTHROW(model_from_hf_config_text(base + "}", "ok.json"));
  CHECK_THROWS_WITH(model_from_hf_config_text(base + R"(, "moe_layer_freq": 2})", "x.json"),
                    Catch::Contains("x.json") && Catch::Contains("moe_layer_freq"));
  CHECK_THROWS_WITH(model_from_hf_config_text(base + R"(, "first_k_dense_replace": 4})", "x.json"),
                    Catch::Contains("dense_layers"));
  CHECK_THROWS_WITH(model_from_hf_config_text(base + R"(, "kv_lora_rank": null})", "x.json"),
                    Catch::Contains("kv_lora_rank"));
  CHECK_THROWS_WITH(model_from_hf_config_text(base + R"(, "attention_bias": true})", "x.json"),
                    Catch::Contains("attention_bias"));
}

TEST_CASE("model checks for DeepSeek's fields name the field", "[deepseek][errors]") {
  model_spec m = toy_deepseek();
  CHECK_NOTHROW(validate_model(m));
  model_spec bad = m;
  bad.kv_heads = 2;
  CHECK_THROWS_WITH(validate_model(bad), Catch::Contains("kv_heads"));
  bad = m, bad.rope_head_dim = 12;
  CHECK_THROWS_WITH(validate_model(bad), Catch::Contains("rope_head_dim"));
  bad = m, bad.dense_layers = 6;
  CHECK_THROWS_WITH(validate_model(bad), Catch::Contains("dense_layers"));
  bad = m, bad.experts = bad.experts_per_token = bad.shared_expert_ffn = 0, bad.router_score_bias = false;
  CHECK_THROWS_WITH(validate_model(bad), Catch::Contains("no experts"));
  bad = m, bad.kv_lora_rank = 0;
  CHECK_THROWS_WITH(validate_model(bad), Catch::Contains("q_lora_rank"));
  bad = m, bad.family = model_family::gpt;
  CHECK_THROWS(validate_model(bad));
  bad = m, bad.kv_lora_rank = m.hidden + 1;  // a latent wider than what it compresses (fuzzing: 10^7 of 7168 passed)
  CHECK_THROWS_WITH(validate_model(bad), Catch::Contains("must not exceed hidden"));
}

TEST_CASE("DeepSeek-V3 FLOPs: 192-wide scores, 128-wide values, 6 x the active GEMM weights", "[deepseek][flops]") {
  const model_spec& m = data().model("deepseek-v3").spec;
  const param_counts c = count_params(m);
  const run_config r = megatron_run(4096);
  const step_flops f = count_flops(m, r, c, profile_of(r).traits);
  // Attention per token: 2 L s (heads x 192 for the scores + heads x 128 for the values).
  const double attention = 2.0 * 61 * 4096 * (128.0 * 192 + 128.0 * 128);
  CHECK(f.attention_forward_per_token == Approx(attention).epsilon(1e-12));
  CHECK(f.model_per_step == Approx(3.0 * (2.0 * double(c.active_matmul) + attention) * 4096).epsilon(1e-12));
  // Full recomputation reruns every layer's active GEMMs: the dense layers' and the MoE layers' own.
  run_config full = r;
  full.recompute = recompute_mode::full;
  const step_flops g = count_flops(m, full, c, profile_of(full).traits);
  CHECK(g.recompute_per_step == Approx(2.0 * double(c.active_matmul_layers_total) * 4096 + 2 * attention * 4096).epsilon(1e-12));
}

TEST_CASE("DeepSeek-V3 activations by hand: latent attention, dense and MoE layers", "[deepseek][memory]") {
  // megatron, bf16 activations, flash attention, no recomputation, b 1, s 4096: T 4096, R 8 x 4096 rows.
  const model_spec& m = data().model("deepseek-v3").spec;
  const run_config r = megatron_run(4096);
  const inventory inv = build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype));
  const std::uint64_t T = 4096, R = 8 * T, h = 7168;
  const std::uint64_t attention = 2 * T * h * 2                 // ln1.in, attn.qkv_in
                                  + 2 * T * 1536 * 2            // q_a, q_b_in
                                  + 2 * T * 576 + 2 * T * 512   // kv_a (latent + RoPE key), kv_b_in
                                  + 2 * T * (3 * 128 * 192 - 128 * 64)  // q (192), k (192), v (128) per head
                                  + 4 * 128 * T                 // lse
                                  + 2 * T * 128 * 128           // attn.out_in: the values' width
                                  + 2 * T * h * 2;              // ln2.in, mlp.fc_in
  const std::uint64_t dense = 3 * 2 * T * 18432;                // gate, up, down_in
  const std::uint64_t moe = 4 * T * 256 + 8 * T * 8 + 4 * T * 8  // router probs, top-k indices and weights
                            + 2 * R * h + 3 * 2 * R * 2048 + 2 * R * h  // permuted in, SwiGLU, expert out
                            + 3 * 2 * T * 2048;                  // the shared expert's SwiGLU
  CHECK(inv.activations_per_layer_bytes == attention + moe);  // the last layer: an MoE layer
  CHECK(inv.activations_all_layers_bytes == 61 * attention + 3 * dense + 58 * moe);
  const tensor_spec* gate = find(inv, "layer{}.mlp.gate");
  REQUIRE(gate);
  CHECK(gate->layer_begin == 0);
  CHECK(gate->layer_end == 3);
  const tensor_spec* router = find(inv, "layer{}.moe.router_probs", 3);
  REQUIRE(router);
  CHECK(router->layer_begin == 3);
  CHECK(router->layer_end == 61);
  CHECK(find(inv, "moe.router_score_bias")->bytes == 4 * 58 * 256);
  // The MLP gradient buffer is as wide as its widest user: a dense layer's d_gate and d_up (2 x 18432 =
  // 36,864 per token) beat the experts' rows (8 rows x 2 x 2048 = 32,768 per token).
  CHECK(find(inv, "bwd.d_ffn")->bytes == 2 * T * 2 * 18432);
}

TEST_CASE("expert parallelism with dense first layers: per-GPU state by hand (--gpus 64 --ep 64 --zero 1)", "[deepseek][ep]") {
  const model_spec& m = data().model("deepseek-v3").spec;
  const param_counts c = count_params(m);
  run_config r = megatron_run(4096);
  r.gpus = 64, r.ep = 64, r.zero = 1;
  const inventory inv = build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype));
  const std::uint64_t experts = 58ull * 256 * 3 * 7168 * 2048, rest = c.total - experts;
  CHECK(c.routed_experts == experts);
  // bf16 weights and fp32 gradients (ZeRO-1 shards neither): every other weight, 4 of each layer's 256 experts.
  CHECK(find(inv, "weights.bf16")->bytes == 2 * (rest + experts / 64));
  CHECK(find(inv, "grads.fp32")->bytes == 4 * (rest + experts / 64));
  // fp32 master weights and both Adam moments: 1/64 of the model each.
  CHECK(find(inv, "master.fp32")->bytes == 4 * ((c.total + 63) / 64));
  CHECK(find(inv, "adam.m")->bytes == 4 * ((c.total + 63) / 64));
  // ZeRO-3 gathers one layer at a time: the largest this GPU computes with. With 4 local experts an MoE
  // layer is attention + norms + router + 4 routed + 1 shared expert: smaller than a dense first layer.
  r.zero = 3;
  const inventory z3 = build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype));
  const std::uint64_t moe_local = c.per_layer - c.routed_experts_per_layer + c.routed_experts_per_layer / 64;
  REQUIRE(moe_local < c.per_dense_layer);
  CHECK(find(z3, "zero3.gathered_weights")->bytes == 2 * 2 * c.per_dense_layer);
}

TEST_CASE("the peak search visits the boundary between dense and MoE layers", "[deepseek][timeline]") {
  // The cheap peak search (a few events) must find what walking every event finds, whichever kind of
  // layer holds the peak: the toy's dense layers have the widest MLP, its MoE layers the most buffers.
  model_spec m = toy_deepseek();
  for (const stack_profile* fw : {&profile_named("megatron"), &profile_named("trainplan"), &profile_named("hf")})
    for (const recompute_mode rc : {recompute_mode::none, recompute_mode::full})
      for (const std::uint64_t accum : {1, 3})
        for (const std::uint64_t dense_ffn : {96, 4096}) {
          run_config r;
          r.profile = fw;
          r.precision = fw->name == "hf" ? precision_regime::amp_bf16
                        : fw->name == "megatron" ? precision_regime::megatron_bf16 : precision_regime::bf16_mixed;
          r.seq = 64, r.micro_batch = 2, r.grad_accum = accum, r.recompute = rc;
          m.dense_ffn = dense_ffn;
          const inventory inv = build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype));
          const timeline_result every = walk_timeline(inv, accum, timeline_detail::every_event);
          std::uint64_t max_live = 0;
          for (const timeline_point& p : every.points) max_live = std::max(max_live, p.live_bytes);
          INFO(fw->name << " recompute " << int(rc) << " accum " << accum << " dense_ffn " << dense_ffn);
          CHECK(walk_timeline(inv, accum, timeline_detail::peak).peak.live_bytes == max_live);
        }
}

TEST_CASE("hf: DeepSeek's rows by layer kind, its gradients by layer, and the allocator replay", "[deepseek][hf]") {
  const model_spec m = toy_deepseek();
  run_config r;
  r.profile = &profile_named("hf");
  r.precision = precision_regime::amp_bf16;
  r.seq = 64, r.micro_batch = 2;
  const precision_layout layout = make_precision_layout(r.precision, r.grad_dtype);
  const model_facts facts = describe_model(m);
  const inventory inv = build_inventory(m, r, layout, &facts);
  const std::uint64_t T = 128;
  // MLA: SDPA keeps kv_b_proj's whole output (its value is a view of it): 4 heads x (8 non-RoPE + 8 value).
  CHECK(find(inv, "layer{}.attn.kv_b_out")->bytes == 2 * T * 4 * 16);
  CHECK(find(inv, "layer{}.attn.v") == nullptr);
  CHECK(find(inv, "layer{}.attn.q_a_norm.in")->bytes == 4 * T * 24);
  CHECK(find(inv, "layer{}.attn.out_in")->bytes == 2 * T * 4 * 8);
  // The dense layers' SwiGLU (96 wide) in layers 0-1, the experts' rows in layers 2-5; the MLP input is
  // cast twice in a dense layer (gate, up), three times in an MoE layer (router, shared gate and up).
  const tensor_spec* gate = find(inv, "layer{}.mlp.gate");
  REQUIRE(gate);
  CHECK((gate->layer_begin == 0 && gate->layer_end == 2 && gate->bytes == 2 * T * 96));
  CHECK(find(inv, "layer{}.mlp.fc_in", 0)->bytes == 2 * 2 * T * 32);
  CHECK(find(inv, "layer{}.mlp.fc_in", 2)->bytes == 3 * 2 * T * 32);
  CHECK(find(inv, "layer{}.moe.gate_up", 2)->layer_begin == 2);
  CHECK(find(inv, "layer{}.moe.shared.gate_sigmoid", 2) == nullptr);  // ungated
  // Autocast's weight copies and the gradients, per kind of layer.
  CHECK(find(inv, "layer{}.autocast.weights", 0)->bytes == 2 * facts.counts.matmul_per_dense_layer);
  CHECK(find(inv, "layer{}.autocast.weights", 5)->bytes == 2 * facts.counts.matmul_per_layer);
  CHECK(find(inv, "layer{}.grads", 1)->bytes == 4 * facts.counts.per_dense_layer);
  CHECK(find(inv, "layer{}.grads", 2)->bytes == 4 * facts.counts.per_layer);
  // Every gradient and weight is accounted for: the per-layer gradients sum to the layers' parameters.
  std::uint64_t grads = 0;
  for (const tensor_spec& t : inv.tensors)
    if (t.name == "layer{}.grads") grads += t.bytes * t.instances();
  CHECK(grads == 4 * facts.counts.layers_total);
  // The replay allocates each layer's gradients tensor by tensor and never holds less than the timeline.
  const allocator_replay replay = replay_allocator(inv, facts, 1);
  CHECK(replay.peak_allocated_bytes >= walk_timeline(inv, 1, timeline_detail::peak).peak.live_bytes);
}

TEST_CASE("pipeline stages of mixed layers: the first all-MoE stage is a candidate", "[deepseek][pipeline]") {
  // 8 layers over 4 stages of 2: stage 1 holds the 2 dense layers (narrow), stage 2 the first MoE layers
  // with 3 micro-batches in flight (of accumulation 8): heavier in weights than stage 1 and in activations
  // than the last stage (1 in flight).
  model_spec m = toy_deepseek();
  m.layers = 8, m.experts = 64, m.ffn = 256, m.dense_ffn = 16, m.shared_expert_ffn = 256;
  run_config r = megatron_run(64);
  r.gpus = 4, r.pp = 4, r.grad_accum = 8;
  const gpu_spec& gpu = data().gpu("h100");
  const plan_result p = evaluate_plan(m, r, gpu, data().calibration_for(gpu));
  CHECK_THAT(p.pipeline_stage, Catch::StartsWith("stage 2 of 4"));
  // That stage holds two MoE layers' weights, in bf16, and no embedding or head.
  const param_counts c = count_params(m);
  CHECK(find(p.inv, "weights.bf16")->bytes == 2 * 2 * c.per_layer);
}

TEST_CASE("LoRA on latent attention counts its own projections", "[deepseek][lora]") {
  const model_spec m = toy_deepseek();
  // q: q_a (32 -> 24) and q_b (24 -> 48); k: kv_a (32 -> 20); v: kv_b (16 -> 4 x 16); o: (32 <- 32).
  const std::uint64_t per_rank = (32 + 24) + (24 + 48) + (32 + 20) + (16 + 64) + (32 + 32);
  CHECK(lora_params(m, 8, lora_q | lora_k | lora_v | lora_o, hf_traits) == 8 * 6 * per_rank);
  CHECK(lora_linears(m, lora_q | lora_k | lora_v | lora_o, hf_traits) == 5);
}
