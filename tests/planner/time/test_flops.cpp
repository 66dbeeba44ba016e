#include <catch2/catch.hpp>

#include "planner/time/flops.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/model/param_count.hpp"
#include "planner/evaluate/plan.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using namespace trainplan::test;

TEST_CASE("model FLOPs equal Megatron's 72BsLh^2(1 + s/6h + V/12hL) for a GPT without biases", "[flops]") {
  // Narayanan et al. 2021, eq. (3). Their count has no biases or norms, and ours counts only GEMM weights,
  // so the two are the same polynomial for a GPT-3-style shape.
  for (auto [L, h, a, V, s, B] : {std::tuple{24, 2048, 16, 50257, 2048, 8}, std::tuple{96, 12288, 96, 51200, 2048, 1},
                                  std::tuple{12, 768, 12, 50257, 1024, 4}}) {
    model_spec m = gpt_shape(L, h, a, V);
    run_config r = run_of(s, B, recompute_mode::none, attention_kind::eager, 0.0);
    const step_flops f = count_flops(m, r, count_params(m), profile_of(r).traits);
    const double megatron = 72.0 * B * s * L * double(h) * h * (1.0 + s / (6.0 * h) + V / (12.0 * h * L));
    CHECK(f.model_per_step == Approx(megatron).epsilon(1e-12));
    // Eager, no recomputation: nothing redone. The harness's head runs over the vocabulary padded to a
    // multiple of 128 (50,257 -> 50,304; 51,200 stays): its forward and two backward GEMMs over the extra rows.
    const double padded_rows = static_cast<double>(((V + 127) / 128 * 128) - V);
    CHECK(f.padded_vocab_per_step == 3.0 * 2.0 * h * padded_rows * B * s);
    CHECK(f.hardware_per_step == f.model_per_step + f.padded_vocab_per_step);
    r.profile = &profile_named("hf");  // stores V rows
    CHECK(count_flops(m, r, count_params(m), profile_of(r).traits).hardware_per_step == f.model_per_step);
  }
}

TEST_CASE("hardware FLOPs add recomputation, model FLOPs do not", "[flops]") {
  model_spec m = gpt_shape(24, 2048, 16);
  const param_counts pc = count_params(m);
  const double tokens = 2048.0 * 4;
  run_config r = run_of(2048, 4, recompute_mode::none, attention_kind::eager, 0.0);
  const step_flops none = count_flops(m, r, pc, profile_of(r).traits);
  const double attention_core = 4.0 * 24 * 2048 * 2048 * tokens;
  r.recompute = recompute_mode::selective;
  const step_flops selective = count_flops(m, r, pc, profile_of(r).traits);
  CHECK(selective.model_per_step == none.model_per_step);
  CHECK(selective.recompute_per_step == Approx(attention_core));
  r.recompute = recompute_mode::full;
  const step_flops full = count_flops(m, r, pc, profile_of(r).traits);
  CHECK(full.recompute_per_step == Approx(2.0 * 12 * 2048.0 * 2048 * 24 * tokens + attention_core));
  // Full recomputation redoes every layer's forward, a third of the layers' work (seed 001: "up to 30-40%");
  // only the small output projection (V = 1000 here) is not redone.
  CHECK(full.hardware_per_step / full.model_per_step == Approx(4.0 / 3.0).margin(0.001));
  r.recompute = recompute_mode::none;
  r.attention = attention_kind::flash;
  CHECK(count_flops(m, r, pc, profile_of(r).traits).recompute_per_step == Approx(attention_core));
}

TEST_CASE("step time, MFU and HFU follow from the op breakdown, peak and calibration", "[flops][time]") {
  const model_spec& m = data().model("gpt2").spec;
  run_config r = run_of(1024, 8, recompute_mode::full, attention_kind::flash, 0.0);
  const gpu_spec& gpu = data().gpu("h100");
  const calibration cal = data().calibration_for(gpu);
  const plan_result p = evaluate_plan(m, r, gpu, cal);
  const double peak = 989.4e12;
  CHECK(p.time.peak_flops_per_s == Approx(peak));
  CHECK(p.time.compute_seconds + p.time.optimizer_seconds == Approx(p.time.breakdown.total()));
  CHECK(p.time.step_seconds == Approx(p.time.compute_seconds + p.time.optimizer_seconds));
  CHECK(p.time.tokens_per_second == Approx(1024.0 * 8 / p.time.step_seconds));
  CHECK(p.time.mfu == Approx(p.flops.model_per_step / (p.time.step_seconds * peak)));
  CHECK(p.time.hfu == Approx(p.flops.hardware_per_step / (p.time.step_seconds * peak)));
  CHECK(p.time.mfu < p.time.hfu);
  const timing_constants& k = cal.timing(profile_of(r).name);
  CHECK(p.time.hfu <= k.gemm_efficiency);
  // AdamW bf16-mixed traffic: read grads (2), master r/w (8), write weights (2), m and v r/w (16) = 28 B/param,
  // at the achieved bandwidth (its launches are counted under overhead).
  // The parameters the harness stores: GPT-2's vocabulary padded to 50304 rows (llm.c's).
  const double stored = static_cast<double>(count_params(with_vocab_rows(m, vocab_rows(m, profile_of(r).traits.vocab_pad_multiple))).total);
  CHECK(p.time.optimizer_seconds == Approx(28.0 * stored / (3.35e12 * k.bandwidth_fraction)));
}

TEST_CASE("a sliding window cuts attention model FLOPs, and hardware FLOPs only where the kernel skips it", "[flops][window]") {
  // Mistral-7B v0.1: a 4096-token window on every layer. At s 8192 each query attends to 4096 keys (no
  // causal discount, as for full attention): half the attention FLOPs of full attention.
  const model_spec& mistral = data().model("mistral-7b").spec;
  const param_counts c = count_params(mistral);
  run_config r;
  r.profile = &profile_named("megatron");
  r.precision = precision_regime::megatron_bf16;
  r.seq = 8192;
  const step_flops windowed = count_flops(mistral, r, c, profile_of(r).traits);
  CHECK(windowed.attention_forward_per_token == 4.0 * 32 * 4096 * 4096);
  CHECK(windowed.masked_attention_per_step == 0);  // flash attention with the window skips the rest
  // Hugging Face's SDPA gets the window as a mask: the same model FLOPs, the full square in hardware.
  r.profile = &profile_named("hf");
  r.precision = precision_regime::amp_bf16;
  const step_flops masked = count_flops(mistral, r, c, profile_of(r).traits);
  CHECK(masked.model_per_step == windowed.model_per_step);
  CHECK(masked.masked_attention_per_step == Approx(3.0 * 4.0 * 32 * (8192 - 4096) * 4096 * 8192).epsilon(1e-12));
  CHECK(masked.hardware_per_step == Approx(masked.model_per_step + masked.recompute_per_step + masked.masked_attention_per_step));
  // Within the window nothing changes.
  r.seq = 4096;
  model_spec no_window = mistral;
  no_window.sliding_window_tokens = 0;
  CHECK(count_flops(mistral, r, c, profile_of(r).traits).hardware_per_step == count_flops(no_window, r, c, profile_of(r).traits).hardware_per_step);
  // Gemma 2 slides on 21 of its 42 layers: at s 8192, 21 x 8192 + 21 x 4096 keys.
  const model_spec& gemma = data().model("gemma-2-9b").spec;
  CHECK(attended_keys(gemma, 8192) == 21.0 * 8192 + 21.0 * 4096);
}

TEST_CASE("packed documents: the model's attention FLOPs are each document's, the masked kernel's the row's", "[unit][flops][packing]") {
  // A Llama-shaped model without a window: attention forward FLOPs per token 2 x keys x (q width + out width).
  const model_spec& m = data().model("llama-3.2-3b").spec;
  REQUIRE(m.sliding_window_tokens == 0);
  const param_counts pc = count_params(m);
  run_config r = run_of(4096, 1, recompute_mode::none, attention_kind::flash_attention_2, 0.0);
  r.profile = &profile_named("hf");
  r.precision = precision_regime::bf16;
  const step_flops unpacked = count_flops(m, r, pc, profile_of(r).traits);
  r.packing_doc_tokens = 1024;
  const step_flops packed = count_flops(m, r, pc, profile_of(r).traits);
  // Four documents of 1024 in a row of 4096: 4 x 1024^2 = 4096^2 / 4 keys.
  CHECK(packed.attention_forward_per_token == Approx(unpacked.attention_forward_per_token / 4).epsilon(1e-12));
  CHECK(packed.model_attention_per_step == Approx(unpacked.model_attention_per_step / 4).epsilon(1e-12));
  CHECK(packed.model_gemm_per_step == Approx(unpacked.model_gemm_per_step).epsilon(1e-12));
  // flash_attn_varlen_func computes only the documents: nothing masked; its backward recomputes them.
  CHECK(packed.masked_attention_per_step == 0);
  CHECK(packed.recompute_per_step == Approx(unpacked.recompute_per_step / 4).epsilon(1e-12));
  // SDPA with the block-diagonal mask computes the whole row: the three quarters across documents are masked.
  r.attention = attention_kind::flash;
  const step_flops masked = count_flops(m, r, pc, profile_of(r).traits);
  CHECK(masked.model_attention_per_step == Approx(unpacked.model_attention_per_step / 4).epsilon(1e-12));
  CHECK(masked.masked_attention_per_step == Approx(unpacked.model_attention_per_step * 3 / 4).epsilon(1e-12));
  CHECK(masked.hardware_per_step == Approx(unpacked.hardware_per_step).epsilon(1e-12));
}
