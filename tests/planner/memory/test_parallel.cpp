// Beyond one GPU and fine-tuning: ZeRO stages, offload, tensor/sequence parallelism, LoRA and QLoRA.
#include <catch2/catch.hpp>

#include "planner/model/model_facts.hpp"
#include "planner/profiles/hf/hf_profile.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/util/input_error.hpp"
#include "planner/run/lora.hpp"
#include "planner/evaluate/plan.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using namespace trainplan::test;

namespace {

std::uint64_t bytes_of(const std::vector<tensor_spec>& tensors, std::initializer_list<std::string_view> names) {
  std::uint64_t b = 0;
  for (const tensor_spec& t : tensors)
    for (std::string_view n : names)
      if (t.name == n) b += t.bytes;
  return b;
}

inventory inventory_for(const model_spec& m, const run_config& r) {
  return build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype));
}

// Weights, gradients, master copy and Adam state on one GPU (communication buffers left out).
std::uint64_t model_state_on_gpu(const model_spec& m, const run_config& r) {
  return bytes_of(inventory_for(m, r).tensors, {"weights.bf16", "grads.bf16", "master.fp32", "adam.m", "adam.v"});
}

}  // namespace

TEST_CASE("ZeRO stages follow the paper's formulas: 16P, 4P + 12P/N, 2P + 14P/N, 16P/N", "[parallel][zero]") {
  // Rajbhandari et al. 2020, Fig. 1 with K = 12 (fp32 master, momentum, variance) and 2-byte weights and
  // gradients: stage 1 partitions the K part, stage 2 also gradients, stage 3 also weights.
  const model_spec& m = data().model("llama-2-7b").spec;
  const std::uint64_t P = 6'738'415'616ull;
  for (std::uint64_t N : {2ull, 8ull, 64ull}) {
    INFO("N = " << N);
    run_config r = run_of(4096, 1, recompute_mode::none, attention_kind::flash, 0.0);
    r.gpus = N;
    auto share = [&](std::uint64_t x) { return (x + N - 1) / N; };
    r.zero = 0;
    CHECK(model_state_on_gpu(m, r) == 16 * P);
    r.zero = 1;
    CHECK(model_state_on_gpu(m, r) == 4 * P + 3 * 4 * share(P));
    r.zero = 2;
    CHECK(model_state_on_gpu(m, r) == 2 * P + 2 * share(P) + 3 * 4 * share(P));
    r.zero = 3;
    CHECK(model_state_on_gpu(m, r) == 2 * share(P) + 2 * share(P) + 3 * 4 * share(P));
  }
}

TEST_CASE("the seed's ZeRO table is wrong for stages 1 and 2 (7B on 8 GPUs)", "[parallel][zero][seed]") {
  // Seed 003 ("ZeRO Stage Comparison", 7B params, 8 GPUs) lists DDP 112 GB, ZeRO-1 98 GB, ZeRO-2 56 GB,
  // ZeRO-3 14 GB. Its own formulas (stage 1 partitions optimizer states, stage 2 adds gradients) give, with
  // P = 7e9: ZeRO-1 = 2P + 2P + 12P/8 = 5.5P = 38.5 GB; ZeRO-2 = 2P + (2P + 12P)/8 = 3.75P = 26.25 GB.
  // DDP (16P = 112 GB) and ZeRO-3 (16P/8 = 14 GB) are right.
  const double P = 7e9, N = 8;
  auto gb = [](double bytes) { return bytes / 1e9; };
  CHECK(gb(16 * P) == Approx(112));
  CHECK(gb(4 * P + 12 * P / N) == Approx(38.5));
  CHECK(gb(2 * P + 14 * P / N) == Approx(26.25));
  CHECK(gb(16 * P / N) == Approx(14));
  // And the planner, per parameter of llama-2-7b, gives the same per-parameter bytes.
  const model_spec& m = data().model("llama-2-7b").spec;
  run_config r = run_of(4096, 1, recompute_mode::none, attention_kind::flash, 0.0);
  r.gpus = 8;
  const double params = 6'738'415'616.0;
  r.zero = 1;
  CHECK(model_state_on_gpu(m, r) / params == Approx(5.5).epsilon(1e-6));
  r.zero = 2;
  CHECK(model_state_on_gpu(m, r) / params == Approx(3.75).epsilon(1e-6));
}

TEST_CASE("ZeRO-3 keeps gather buffers of two layers, data parallelism a gradient bucket", "[parallel][zero]") {
  const model_spec& m = data().model("llama-2-7b").spec;
  run_config r = run_of(4096, 1, recompute_mode::none, attention_kind::flash, 0.0);
  r.gpus = 8;
  r.zero = 3;
  const inventory z3 = inventory_for(m, r);
  CHECK(bytes_of(z3.tensors, {"zero3.gathered_weights"}) == 2 * 2 * 202'383'360ull);  // two layers of bf16 weights
  r.zero = 1;
  CHECK(bytes_of(inventory_for(m, r).tensors, {"ddp.grad_bucket"}) == 25ull << 20);
  r.gpus = 1;
  r.zero = 0;
  CHECK(bytes_of(inventory_for(m, r).tensors, {"ddp.grad_bucket"}) == 0);
}

TEST_CASE("offload moves the optimizer (and with ZeRO-3 the weights) to CPU memory", "[parallel][offload]") {
  const model_spec& m = data().model("llama-2-7b").spec;
  const std::uint64_t P = 6'738'415'616ull;
  run_config r = run_of(4096, 1, recompute_mode::none, attention_kind::flash, 0.0);
  r.offload = offload_mode::optimizer;
  const inventory opt = inventory_for(m, r);
  CHECK(bytes_of(opt.host_tensors, {"master.fp32", "adam.m", "adam.v"}) == 12 * P);
  CHECK(bytes_of(opt.tensors, {"weights.bf16", "grads.bf16"}) == 4 * P);
  CHECK(bytes_of(opt.tensors, {"master.fp32", "adam.m", "adam.v"}) == 0);
  r.gpus = 4;
  r.zero = 3;
  r.offload = offload_mode::both;
  const inventory both = inventory_for(m, r);
  CHECK(bytes_of(both.host_tensors, {"weights.bf16"}) == 2 * (P / 4));  // bf16: 2 bytes per weight
  CHECK(bytes_of(both.host_tensors, {"master.fp32", "adam.m", "adam.v"}) == 12 * ((P + 3) / 4));
  // The plan checks host memory when given, and adds the PCIe time.
  const gpu_spec& g = data().gpu("h100");
  r.host_memory_bytes = 8ull << 30;  // too little for 12P/4 = 20 GB
  const plan_result p = evaluate_plan(m, r, g, data().calibration_for(g));
  CHECK(p.host_bytes == bytes_of(both.host_tensors, {"weights.bf16", "master.fp32", "adam.m", "adam.v"}));
  CHECK_FALSE(p.host_fits);
  CHECK_FALSE(p.fits);
  CHECK(p.time.offload_seconds > 0);
  r.offload = offload_mode::params;
  r.zero = 2;
  CHECK_THROWS_AS(evaluate_plan(m, r, g, data().calibration_for(g)), input_error);
}

TEST_CASE("tensor and sequence parallelism follow Korthikanti et al. Table 2", "[parallel][tp]") {
  // Per layer, GPT with dropout and eager attention, 16-bit: tensor parallel t: sbh(10 + 24/t) + 5as^2b/t;
  // with sequence parallelism: (34sbh + 5as^2b)/t.
  for (std::uint64_t t : {2ull, 4ull, 8ull}) {
    const std::uint64_t s = 2048, b = 2, h = 4096, a = 32;
    model_spec m = gpt_shape(4, h, a);
    run_config r = run_of(s, b, recompute_mode::none, attention_kind::eager, 0.1);
    r.tp = r.gpus = t;
    CHECK(inventory_for(m, r).activations_per_layer_bytes == s * b * h * 10 + s * b * h * 24 / t + 5 * a * s * s * b / t);
    r.sequence_parallel = true;
    CHECK(inventory_for(m, r).activations_per_layer_bytes == (34 * s * b * h + 5 * a * s * s * b) / t);
  }
  run_config bad = run_of(1024, 1, recompute_mode::none, attention_kind::flash, 0.0);
  bad.tp = 3;
  bad.gpus = 3;
  const gpu_spec& g = data().gpu("h100");
  CHECK_THROWS_AS(evaluate_plan(data().model("llama-2-7b").spec, bad, g, data().calibration_for(g)), input_error);
}

TEST_CASE("LoRA parameter counts and NF4 storage", "[parallel][lora]") {
  const model_spec& m = data().model("llama-2-7b").spec;
  // r (in + out) per targeted layer: q, k, v, o are 4096 -> 4096: 32 layers x 4 x 16 x 8192.
  CHECK(lora_params(m, 16, lora_q | lora_k | lora_v | lora_o, hf_traits) == 16'777'216ull);  // the seed's "about 20M"
  CHECK(lora_params(m, 8, lora_q | lora_v, hf_traits) == 32ull * 2 * 8 * 8192);
  CHECK(lora_params(m, 16, lora_mlp, hf_traits) == 32ull * 16 * 3 * (4096 + 11008));  // gate, up, down
  const model_spec& gqa = data().model("llama-3.1-8b").spec;
  CHECK(lora_params(gqa, 16, lora_k, hf_traits) == 32ull * 16 * (4096 + 1024));
  const model_spec& gpt = data().model("gpt2").spec;
  CHECK(lora_params(gpt, 4, lora_mlp, hf_traits) == 12ull * 4 * 2 * (768 + 3072));
  // GPT-2's c_attn holds q, k and v: peft adapts it as one module, A [r, 768] and B [2304, r], whichever
  // of the three are named.
  CHECK(lora_params(gpt, 8, lora_q, hf_traits) == 12ull * 8 * (768 + 2304));
  CHECK(lora_params(gpt, 8, lora_q | lora_k | lora_v | lora_o, hf_traits) == 12ull * 8 * ((768 + 2304) + (768 + 768)));
  CHECK(lora_linears(gpt, lora_q | lora_k | lora_v | lora_o, hf_traits) == 2);
  CHECK(lora_linears(gpt, lora_v | lora_mlp, hf_traits) == 3);
  // QLoRA: 4 + 8/64 + 32/(64*256) bits per weight (Dettmers et al. 2023, Sec. 3: 0.127 bits of constants).
  CHECK(nf4_bytes(64ull * 256 * 1000) * 8.0 / (64.0 * 256 * 1000) == Approx(4.127).epsilon(1e-3));
  CHECK(nf4_bytes(1) == 1 + 1 + 4);
}

TEST_CASE("the seeds' case: a 7B model on a 24 GB A10G with LoRA, recomputation and accumulation", "[parallel][lora][seed]") {
  // Seed 004, section 9: full fine-tuning of a 7B model needs ~112 GB; LoRA r=16 on q,k,v,o with bf16,
  // gradient checkpointing, micro-batch 4 and 8 accumulation steps fits a 24 GB A10G: frozen base ~14 GB,
  // adapters ~0.04 GB, their gradients ~0.04 GB, fp32 Adam state ~0.24 GB (for its rounded 20M parameters).
  const model_spec& m = data().model("llama-2-7b").spec;
  const gpu_spec& g = data().gpu("a10g");
  run_config r = run_of(1024, 4, recompute_mode::full, attention_kind::flash, 0.0);
  r.grad_accum = 8;
  CHECK_FALSE(evaluate_plan(m, r, g, data().calibration_for(g)).fits);
  r.finetune = finetune_kind::lora;
  const plan_result p = evaluate_plan(m, r, g, data().calibration_for(g));
  CHECK(p.fits);
  CHECK(p.trainable_params == 16'777'216ull);
  const inventory& inv = p.inv;
  CHECK(bytes_of(inv.tensors, {"weights.bf16"}) == 2 * 6'738'415'616ull);  // 13.5 GB: the seed's "14 GB"
  CHECK(bytes_of(inv.tensors, {"lora.weights"}) == 2 * 16'777'216ull);     // 0.034 GB: "~0.04 GB"
  CHECK(bytes_of(inv.tensors, {"lora.grads"}) == 2 * 16'777'216ull);
  CHECK(bytes_of(inv.tensors, {"lora.master.fp32", "adam.m", "adam.v"}) == 12 * 16'777'216ull);  // 0.2 GB: "~0.24"
  // QLoRA shrinks the frozen base to about a quarter.
  r.finetune = finetune_kind::qlora;
  const plan_result q = evaluate_plan(m, r, g, data().calibration_for(g));
  CHECK(q.fits);
  CHECK(q.category_bytes(tensor_category::weights) < p.category_bytes(tensor_category::weights) / 3);
  // Frozen weights need no weight-gradient GEMMs: model FLOPs are 2x forward, not 3x.
  CHECK(p.flops.model_per_step < evaluate_plan(m, run_of(1024, 4, recompute_mode::full, attention_kind::flash, 0.0), g,
                                               data().calibration_for(g)).flops.model_per_step * 8 * 0.7);
}

TEST_CASE("pipeline stages: the first keeps p micro-batches of its layers, the last holds the head", "[parallel][pp]") {
  // Korthikanti et al. 2022, Sec. 4.2.3: with 1F1B the first stage stores activations of p micro-batches
  // for its L/p layers, the same as one micro-batch of all L layers.
  const model_spec m = gpt_shape(8, 512, 8, 1000);
  const gpu_spec& g = data().gpu("h100");
  const calibration cal = data().calibration_for(g);
  run_config one = run_of(1024, 2, recompute_mode::none, attention_kind::flash, 0.0);
  one.grad_accum = 16;
  const plan_result whole = evaluate_plan(m, one, g, cal);
  run_config pp = one;
  pp.pp = pp.gpus = 4;
  const plan_result staged = evaluate_plan(m, pp, g, cal);
  CHECK_THAT(staged.pipeline_stage, Catch::StartsWith("first of 4"));
  CHECK(staged.inv.layers == 2);
  CHECK(staged.inv.activations_per_layer_bytes == 4 * whole.inv.activations_per_layer_bytes);
  CHECK(staged.inv.activations_per_layer_bytes * staged.inv.layers == whole.inv.activations_per_layer_bytes * 8);
  // Its weights: the embedding and 2 of 8 layers (tied head: the last stage keeps its own copy).
  // The harness's table holds V = 1000 padded to 1024 rows (llm.c's Vp).
  const param_counts& c = whole.params;
  CHECK(staged.category_bytes(tensor_category::weights) == 2 * (c.embedding + 24 * 512 + 2 * c.per_layer));
  // The bubble: (p - 1) / m of the compute time (Narayanan et al. 2021).
  run_config few = pp;
  few.grad_accum = 4;
  const plan_result f = evaluate_plan(m, few, g, cal);
  CHECK(f.time.compute_seconds == Approx((f.time.breakdown.total() - f.time.optimizer_seconds) * (1 + 3.0 / 4)));
  CHECK(staged.time.compute_seconds ==
        Approx((staged.time.breakdown.total() - staged.time.optimizer_seconds) * (1 + 3.0 / 16)));
  // A huge vocabulary and one micro-batch in flight: the last stage, with the logits, peaks higher.
  const model_spec wide = gpt_shape(8, 256, 4, 200000);
  run_config last = run_of(1024, 4, recompute_mode::full, attention_kind::flash, 0.0);
  last.pp = last.gpus = 4;
  CHECK_THAT(evaluate_plan(wide, last, g, cal).pipeline_stage, Catch::StartsWith("last of 4"));
  run_config bad = one;
  bad.pp = 3;
  bad.gpus = 3;
  CHECK_THROWS_WITH(evaluate_plan(m, bad, g, cal), Catch::Contains("must divide the 8 layers"));
  bad.pp = 2;
  CHECK_THROWS_AS(evaluate_plan(m, bad, g, cal), input_error);  // 3 GPUs are not a multiple of 2 stages
}

TEST_CASE("context parallelism: every activation of a layer on seq / cp tokens, and the ring's working sets", "[parallel][cp]") {
  // Megatron-Core gives each of cp GPUs seq / cp tokens of every sequence (get_batch_on_this_cp_rank). Per layer,
  // GPT with flash attention and no dropout, 16-bit, kept for the backward (Korthikanti et al. 2022, Sec. 4.1, less
  // the dropout masks and with flash attention's fp32 log-sum-exp instead of the scores): norm inputs 2sbh + 2sbh,
  // QKV input 2sbh, Q K V 6sbh, the attention output 2sbh, the MLP input 2sbh, GELU's input and output 8sbh + 8sbh,
  // and 4asb of log-sum-exp: 32sbh + 4asb, with s / cp for s.
  const std::uint64_t s = 4096, b = 1, h = 4096, a = 32;
  const model_spec m = gpt_shape(4, h, a);
  for (std::uint64_t cp : {1ull, 2ull, 4ull}) {
    run_config r = run_of(s, b, recompute_mode::none, attention_kind::flash, 0.0);
    r.profile = &profile_named("megatron");
    r.precision = precision_regime::megatron_bf16;
    r.cp = r.gpus = cp;
    const inventory inv = inventory_for(m, r);
    const std::uint64_t sl = s / cp;
    INFO("cp " << cp);
    CHECK(inv.activations_per_layer_bytes == 32 * sl * b * h + 4 * a * sl * b);
    if (cp == 1) {
      CHECK(tensor_named(inv, "layer{}.attn.cp_ring_kv") == nullptr);
      continue;
    }
    // Transformer Engine's ring (AttnFuncWithCPAndKVP2P), a layer's working sets: forward, the cp - 1 key and value
    // blocks beyond the one kept (b x s/cp x 2h, 16-bit), cp partial outputs (b x s/cp x h) and cp fp32 log-sum-exps
    // (b x a x s/cp); backward, two send and receive buffers of a key and value block and its gradient (4 blocks)
    // and the query gradient (b x s/cp x h).
    CHECK(tensor_named(inv, "layer{}.attn.cp_ring_kv")->bytes == (cp - 1) * b * sl * 2 * h * 2);
    CHECK(tensor_named(inv, "layer{}.attn.cp_ring_out")->bytes == cp * b * sl * h * 2);
    CHECK(tensor_named(inv, "layer{}.attn.cp_ring_lse")->bytes == cp * b * a * sl * 4);
    CHECK(tensor_named(inv, "layer{}.attn.cp_ring_grad_kv")->bytes == 4 * b * sl * 2 * h * 2);
    CHECK(tensor_named(inv, "layer{}.attn.cp_ring_grad_q")->bytes == b * sl * h * 2);
    CHECK_FALSE(tensor_named(inv, "layer{}.attn.cp_ring_kv")->kept_to_backward);
  }
}

TEST_CASE("context parallelism: the distributed optimizer shards over data x context parallelism", "[parallel][cp]") {
  // Megatron-Core's distributed optimizer shards its fp32 state over the data-parallel group with context
  // parallelism (dp x cp ranks hold the same weights): on 8 GPUs with cp 2 and --zero 1, each Adam moment is
  // 4 bytes x P / 8, as on 8 data-parallel GPUs without it.
  const model_spec m = gpt_shape(4, 1024, 16);
  run_config r = run_of(4096, 1, recompute_mode::none, attention_kind::flash, 0.0);
  r.profile = &profile_named("megatron");
  r.precision = precision_regime::megatron_bf16;
  r.zero = 1;
  r.gpus = 8;
  const std::uint64_t plain = bytes_of(inventory_for(m, r).tensors, {"adam.m"});
  r.cp = 2;
  CHECK(r.data_parallel() == 4);
  CHECK(bytes_of(inventory_for(m, r).tensors, {"adam.m"}) == plain);
  const double params = static_cast<double>(describe_model(m).counts.total);
  CHECK(static_cast<double>(plain) == Approx(4 * params / 8).epsilon(1e-3));  // per-tensor shards round up
}

TEST_CASE("context parallelism: refused where it cannot run, with the option named", "[parallel][cp]") {
  const model_spec& m = data().model("llama-2-7b").spec;
  const gpu_spec& g = data().gpu("h100");
  const calibration cal = data().calibration_for(g);
  run_config r = run_of(4096, 1, recompute_mode::none, attention_kind::flash, 0.0);
  r.gpus = r.cp = 2;
  r.precision = precision_regime::megatron_bf16;
  // A stack without context parallelism, named with the one that has it.
  r.profile = &profile_named("hf");
  r.precision = precision_regime::bf16_mixed;
  CHECK_THROWS_WITH(evaluate_plan(m, r, g, cal), Catch::Contains("--cp 2: --framework hf has no context parallelism") &&
                                                     Catch::Contains("--framework megatron"));
  r.profile = &profile_named("megatron");
  r.precision = precision_regime::megatron_bf16;
  // A sequence that does not split into 2 cp chunks (Megatron-Core's load balancing).
  r.seq = 4098;
  CHECK_THROWS_WITH(evaluate_plan(m, r, g, cal), Catch::Contains("--cp 2 needs --seq 4098"));
  r.seq = 4096;
  // Transformer Engine's unfused attention has no context parallelism.
  r.attention = attention_kind::eager;
  CHECK_THROWS_WITH(evaluate_plan(m, r, g, cal), Catch::Contains("--attention flash"));
  r.attention = attention_kind::flash;
  // 6 GPUs are not a multiple of tp 2 x cp 2.
  r.tp = 2, r.gpus = 6;
  CHECK_THROWS_WITH(evaluate_plan(m, r, g, cal), Catch::Contains("--cp 2"));
}
