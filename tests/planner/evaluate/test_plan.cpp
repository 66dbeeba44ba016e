// evaluate_plan end to end: exactness at extreme sizes, overflow, the verdict, and the seeds' case.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>

#include "planner/util/input_error.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/evaluate/plan.hpp"
#include "planner/search/suggest.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using namespace trainplan::test;

namespace {

plan_result plan_for(const char* model, run_config r, const char* gpu = "h100") {
  const gpu_spec& g = data().gpu(gpu);
  return evaluate_plan(data().model(model).spec, r, g, data().calibration_for(g));
}

}  // namespace

TEST_CASE("405B at a 1M-token sequence stays exact in 64 bits", "[plan][overflow]") {
  run_config r = run_of(1ull << 20, 1, recompute_mode::none, attention_kind::flash, 0.0);
  const plan_result p = plan_for("llama-3.1-405b", r);
  __extension__ typedef unsigned __int128 u128;  // exact beyond 64 bits, to compare with
  const u128 s = 1ull << 20, h = 16384, f = 53248, a = 128, qkv = 16384 + 2 * 1024;
  // ln1.in, qkv_in, out_in, ln2.in, fc_in (5 x 2sh) + qkv + gate/up/down + fp32 lse
  const u128 expected = 10 * s * h + 2 * s * qkv + 6 * s * f + 4 * a * s;
  CHECK(p.inv.activations_per_layer_bytes == static_cast<std::uint64_t>(expected));
  CHECK_FALSE(p.fits);
  CHECK(p.peak_bytes > 16ull * 405'000'000'000ull);
  // Eager attention at this size is still below 2^64 bytes per layer (2as^2 = 2^48 * 2^8)...
  r.attention = attention_kind::eager;
  CHECK_NOTHROW(plan_for("llama-3.1-405b", r));
  // ...but a micro-batch of 2^20 such sequences is not, and must say so instead of wrapping around.
  r.micro_batch = 1ull << 20;
  CHECK_THROWS_WITH(plan_for("llama-3.1-405b", r), Catch::Contains("64 bits"));
}

TEST_CASE("the verdict compares the peak with the GPU's memory", "[plan]") {
  run_config r = run_of(1024, 4, recompute_mode::none, attention_kind::flash, 0.1);
  const plan_result small = plan_for("gpt2", r);
  CHECK(small.fits);
  CHECK(small.headroom_bytes == std::int64_t(small.gpu.memory_bytes - small.peak_bytes));
  CHECK(small.peak_bytes == small.tensor_peak_bytes + small.overhead.total());
  r.seq = 4096;
  const plan_result big = plan_for("llama-2-7b", r);
  CHECK_FALSE(big.fits);
  CHECK(big.headroom_bytes == -std::int64_t(big.peak_bytes - big.gpu.memory_bytes));
}

TEST_CASE("the seeds' 7B case: ~112 GB of model state before one activation", "[plan][seed]") {
  // Seed 000: "a 7B parameter model in mixed precision already needs about 112 GB just for weights,
  // gradients, and optimizer states". llama-2-7b has 6.74B parameters: 107.8 GB.
  run_config r = run_of(4096, 1, recompute_mode::none, attention_kind::flash, 0.0);
  const plan_result p = plan_for("llama-2-7b", r);
  const std::uint64_t states = p.category_bytes(tensor_category::weights) + p.category_bytes(tensor_category::master_weights) +
                               p.category_bytes(tensor_category::gradients) + p.category_bytes(tensor_category::optimizer);
  CHECK(states == 16 * p.params.total);
  CHECK(states > p.gpu.memory_bytes);
}

TEST_CASE("bf16 on a GPU without bf16 is an input error", "[plan]") {
  run_config r = run_of(1024, 1, recompute_mode::none, attention_kind::flash, 0.0);
  CHECK_THROWS_WITH(plan_for("gpt2", r, "v100-16gb"), Catch::Contains("bf16"));
  r.precision = precision_regime::fp16_mixed;
  CHECK_NOTHROW(plan_for("gpt2", r, "v100-16gb"));
  r.precision = precision_regime::fp8_mixed;
  CHECK_THROWS_AS(plan_for("gpt2", r, "a100-80gb"), input_error);
}

TEST_CASE("a sequence longer than the learned positions is refused", "[plan]") {
  run_config r = run_of(2048, 1, recompute_mode::none, attention_kind::flash, 0.0);
  CHECK_THROWS_WITH(plan_for("gpt2", r), Catch::Contains("1024"));
}

TEST_CASE("suggestions fit, are ranked by cost then fewest changes, and are not supersets of each other", "[plan][suggest]") {
  // gpt2-xl at micro-batch 4 with eager attention needs ~59 GiB on a 39.5 GiB A100: the s^2 softmax
  // buffers (48 layers x 5as^2b) are the excess, so flash attention alone must be among the answers.
  run_config r = run_of(1024, 4, recompute_mode::none, attention_kind::eager, 0.1);
  const model_spec& m = data().model("gpt2-xl").spec;
  const gpu_spec& gpu = data().gpu("a100-40gb");
  const calibration cal = data().calibration_for(gpu);
  REQUIRE_FALSE(evaluate_plan(m, r, gpu, cal).fits);
  const std::vector<fit_suggestion> s = suggest_fits(m, r, gpu, cal, {8});
  REQUIRE_FALSE(s.empty());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const plan_result again = evaluate_plan(m, s[i].run, gpu, cal);
    CHECK(again.fits);
    CHECK(again.peak_bytes == s[i].peak_bytes);
    CHECK(s[i].run.micro_batch * s[i].run.grad_accum == 4);  // the global batch is kept
    if (i > 0 && s[i - 1].costs == s[i].costs) CHECK(s[i - 1].changes.size() <= s[i].changes.size());
    for (std::size_t j = 0; j < i; ++j) {  // no answer contains an earlier, smaller answer
      const bool contains_all = std::all_of(s[j].changes.begin(), s[j].changes.end(), [&](const std::string& c) {
        return std::find(s[i].changes.begin(), s[i].changes.end(), c) != s[i].changes.end();
      });
      CHECK_FALSE(contains_all);
    }
  }
  CHECK(std::any_of(s.begin(), s.end(), [](const fit_suggestion& x) {
    return x.changes == std::vector<std::string>{"--attention flash"};
  }));
  // Changes that keep the numerics rank before those that do not.
  CHECK_FALSE(s.front().changes_training());
  bool numerics_seen = false;
  for (const fit_suggestion& x : s) {
    if (x.costs & cost_numerics) numerics_seen = true;
    else if (x.costs == cost_none) CHECK_FALSE(numerics_seen);
  }
}

TEST_CASE("7B on an H100: the levers a user would pull, labelled and honouring --keep", "[plan][suggest]") {
  // Issue 14: the headline run does not fit under hf (amp-bf16, foreach AdamW). Pure bf16 and 8-bit AdamW
  // with full recomputation must be among the answers, labelled as changing the numerics; the first
  // answer keeps the numerics.
  const model_spec& m = data().model("llama-2-7b").spec;
  const run_config r = hf_headline_run();
  const gpu_spec& gpu = data().gpu("h100");
  const calibration cal = data().calibration_for(gpu);
  REQUIRE_FALSE(evaluate_plan(m, r, gpu, cal).fits);
  const std::vector<fit_suggestion> s = suggest_fits(m, r, gpu, cal, {8});
  REQUIRE(s.size() >= 5);
  CHECK((s.front().costs & (cost_numerics | cost_hardware)) == 0);
  auto find = [&](const std::vector<std::string>& changes) {
    return std::find_if(s.begin(), s.end(), [&](const fit_suggestion& x) { return x.changes == changes; });
  };
  const auto bf16 = find({"--precision bf16"});
  REQUIRE(bf16 != s.end());
  CHECK(bf16 - s.begin() < 5);
  CHECK(bf16->costs == cost_numerics);
  CHECK(suggestion_cost_text(bf16->costs) == "changes the numerics");
  const auto adam8 = find({"--recompute full", "--optimizer adamw-8bit"});
  REQUIRE(adam8 != s.end());
  CHECK(adam8->costs == cost_numerics);
  for (const fit_suggestion& x : s) CHECK(evaluate_plan(m, x.run, gpu, cal).fits);  // each one, as suggested, fits
  // --keep: nothing that touches precision, optimizer or GPU count.
  const unsigned kept = parse_levers("precision,optimizer,gpus", "--keep");
  for (const fit_suggestion& x : suggest_fits(m, r, gpu, cal, {8, kept})) {
    CHECK(x.run.precision == r.precision);
    CHECK(x.run.optimizer == r.optimizer);
    CHECK(x.run.gpus == 1);
  }
  CHECK_THROWS_WITH(parse_levers("precision,colour", "--keep"), Catch::Contains("--keep: unknown lever 'colour'"));
}

TEST_CASE("7B on an H100: pure bf16's roomiest form adds full recompute and fused AdamW", "[plan][suggest]") {
  // Issue 14: what people run when 7B does not fit is pure bf16 with full recomputation (on a real H100 with
  // fused AdamW, 53.4 GiB at the device level). Plain "--precision bf16" already fits, so it is the
  // suggestion; its roomiest form, with the same numerics, must be that configuration, with a lower peak.
  const model_spec& m = data().model("llama-2-7b").spec;
  const run_config r = hf_headline_run();
  const gpu_spec& gpu = data().gpu("h100");
  const calibration cal = data().calibration_for(gpu);
  const std::vector<fit_suggestion> s = suggest_fits(m, r, gpu, cal, {8});
  const auto bf16 = std::find_if(s.begin(), s.end(), [](const fit_suggestion& x) {
    return x.changes == std::vector<std::string>{"--precision bf16"};
  });
  REQUIRE(bf16 != s.end());
  REQUIRE(bf16->roomiest);
  const std::vector<std::string>& added = bf16->roomiest->added;
  CHECK(std::find(added.begin(), added.end(), "--recompute full") != added.end());
  CHECK(std::find(added.begin(), added.end(), "--optimizer-impl fused") != added.end());
  CHECK(bf16->roomiest->peak_bytes < bf16->peak_bytes);
  const plan_result roomy = evaluate_plan(m, bf16->roomiest->run, gpu, cal);
  CHECK(roomy.peak_bytes == bf16->roomiest->peak_bytes);
  CHECK(roomy.fits);
  CHECK(bf16->roomiest->run.precision == precision_regime::bf16);  // the same numerics as its suggestion
  // Each added flag lowers the peak: without any one of them the peak is higher.
  for (const std::string& flag : added) {
    run_config without = bf16->roomiest->run;
    if (flag == "--recompute full") without.recompute = bf16->run.recompute;
    if (flag == "--optimizer-impl fused") without.optimizer_impl = bf16->run.optimizer_impl;
    INFO(flag);
    CHECK(evaluate_plan(m, without, gpu, cal).peak_bytes > roomy.peak_bytes);
  }
  // --keep recompute: no roomiest form touches recomputation.
  for (const fit_suggestion& x : suggest_fits(m, r, gpu, cal, {8, lever_recompute}))
    if (x.roomiest) CHECK(x.roomiest->run.recompute == r.recompute);
}

TEST_CASE("the shorter-sequence lever: the longest sequence that fits, as a multiple of 256", "[plan][suggest]") {
  const model_spec& m = data().model("llama-2-7b").spec;
  run_config r;
  r.profile = &profile_named("trainplan");
  r.precision = precision_regime::bf16;  // 8 bytes a parameter of state: short sequences fit, 64k does not
  r.seq = 65536;
  const gpu_spec& gpu = data().gpu("h100");
  const calibration cal = data().calibration_for(gpu);
  REQUIRE_FALSE(evaluate_plan(m, r, gpu, cal).fits);
  auto shorter = [&](const std::vector<fit_suggestion>& s) {
    return std::find_if(s.begin(), s.end(), [](const fit_suggestion& x) { return x.levers == lever_seq; });
  };
  const std::vector<fit_suggestion> without = suggest_fits(m, r, gpu, cal, {50});
  CHECK(shorter(without) == without.end());  // never unless allowed
  const std::vector<fit_suggestion> with = suggest_fits(m, r, gpu, cal, {50, 0, true});
  const auto seq = shorter(with);
  REQUIRE(seq != with.end());
  CHECK(seq->costs == cost_shorter_seq);
  CHECK(seq->run.seq < r.seq);
  CHECK(seq->run.seq % 256 == 0);
  CHECK(seq->changes == std::vector<std::string>{fmt::format("--seq {}", seq->run.seq)});
  CHECK(evaluate_plan(m, seq->run, gpu, cal).fits);
  run_config longer = seq->run;
  longer.seq += 256;  // the next multiple of 256 does not fit
  CHECK_FALSE(evaluate_plan(m, longer, gpu, cal).fits);
  const std::vector<fit_suggestion> kept = suggest_fits(m, r, gpu, cal, {50, lever_seq, true});
  CHECK(shorter(kept) == kept.end());
}

TEST_CASE("the shorter-sequence lever under hf finds a fitting multiple of 256 where fitting is not monotone", "[plan][suggest][allocator]") {
  // Mistral-7B, full recomputation, on an H200: at 44,800 tokens the allocator replay runs out; below it the
  // verdict is not monotone (42,496 and 42,752 do not fit, 43,008 to 44,288 do, and a bisection over the
  // sequence lands below that band), so the lever tries the multiples of 256 below the run's first. (A model
  // change may move the example; the properties stand.)
  const model_spec& m = data().model("mistral-7b").spec;
  run_config r;
  r.profile = &profile_named("hf");
  r.precision = precision_regime::amp_bf16;
  r.recompute = recompute_mode::full;
  r.seq = 44800;
  const gpu_spec& gpu = data().gpu("h200");
  const calibration cal = data().calibration_for(gpu);
  REQUIRE_FALSE(evaluate_plan(m, r, gpu, cal).fits);
  const std::vector<fit_suggestion> with = suggest_fits(m, r, gpu, cal, {50, 0, true});
  const auto seq = std::find_if(with.begin(), with.end(), [](const fit_suggestion& x) { return x.levers == lever_seq; });
  REQUIRE(seq != with.end());
  CHECK(seq->run.seq % 256 == 0);
  CHECK(evaluate_plan(m, seq->run, gpu, cal).fits);
  for (run_config longer = seq->run; longer.seq + 256 < r.seq;) {  // no longer multiple of 256 fits
    longer.seq += 256;
    INFO("seq " << longer.seq);
    CHECK_FALSE(evaluate_plan(m, longer, gpu, cal).fits);
  }
}

TEST_CASE("405B on one H100: only ZeRO-3 over at least 128 GPUs is suggested", "[plan][suggest]") {
  run_config r = run_of(4096, 1, recompute_mode::none, attention_kind::flash, 0.0);
  const model_spec& m = data().model("llama-3.1-405b").spec;
  const gpu_spec& gpu = data().gpu("h100");
  // By hand: fp32 weights and gradients and AdamW's two moments are 16 bytes a parameter, 405e9 x 16 = 6.5e12
  // bytes; spread evenly over 80 GB cards that is at least 82 of them even with no activation, so the fewest
  // power of two is 128, and only ZeRO-3 shards all four. Nothing on one GPU, nor with fewer GPUs, can fit.
  const auto found = suggest_fits(m, r, gpu, data().calibration_for(gpu));
  CHECK_FALSE(found.empty());  // with full recomputation, enough GPUs do hold it
  for (const fit_suggestion& f : found) {
    CHECK(f.gpus >= 128);
    CHECK(f.run.zero == 3);
  }
}

TEST_CASE("context and pipeline parallelism: the step grows by the exposed communication, no more", "[plan][communication][cp]") {
  // The same plan on a DGX H100 node (collectives modelled) and with no cluster (not modelled): the step differs by
  // what the collectives expose plus the slowdown of the compute the hidden ones share the SMs with.
  const model_spec& m = data().model("llama-2-7b").spec;
  const gpu_spec& g = data().gpu("h100");
  gpu_spec alone = g;
  alone.cluster.reset();
  const calibration cal = data().calibration_for(g);
  // A send between two GPUs of the node: NCCL's point-to-point latency, 7.2 us, plus the bytes at 364.5 GB/s
  // (planner/time/collectives.hpp; tests/planner/time/test_communication.cpp derives both).
  auto send_seconds = [](double bytes) { return 7.2e-6 + bytes / 364.5e9; };
  auto check_growth = [&](const run_config& r) {
    const plan_result with = evaluate_plan(m, r, g, cal), without = evaluate_plan(m, r, alone, cal);
    REQUIRE(with.time.communication_modelled);
    REQUIRE_FALSE(without.time.communication_modelled);
    const comm_time& c = with.time.communication;
    CHECK(with.time.step_seconds - without.time.step_seconds == Approx(c.exposed_seconds + c.slowdown_seconds));
    CHECK(c.exposed_seconds <= c.seconds);
    return c;
  };

  // Context parallelism, cp 2 at s 16,384: each GPU's key and value block is 8,192 x 2 x 4,096 x 2 B = 134 MB, a send
  // of 375 us. Beside it one step's attention of a layer, 2 x 8,192 x 16,384 x 8,192 / 2 = 1.1 TFLOP, which takes at
  // least 1.1 ms at the H100's 989 TFLOP/s peak: every send hides. Forward 1, backward 2 sends a layer, 32 layers.
  run_config cp = run_of(16384, 1, recompute_mode::none, attention_kind::flash, 0.0);
  cp.profile = &profile_named("megatron");
  cp.precision = precision_regime::megatron_bf16;
  cp.gpus = cp.cp = 2;
  const comm_time c = check_growth(cp);
  const std::size_t context = static_cast<std::size_t>(comm_group::context);
  CHECK(c.seconds_by_group[context] == Approx(3 * 32 * send_seconds(8192.0 * 2 * 4096 * 2)));
  CHECK(c.exposed_by_group[context] == Approx(0).margin(1e-12));

  // Pipeline parallelism, pp 2 on the node, 8 micro-batches of [4096, 1, 4096] activations (33.5 MB, a send of
  // 99 us). 1F1B: 2 (m + p - 1) = 18 sends, each waited for.
  run_config pp = run_of(4096, 1, recompute_mode::none, attention_kind::flash, 0.0);
  pp.profile = &profile_named("megatron");
  pp.precision = precision_regime::megatron_bf16;
  pp.gpus = pp.pp = 2, pp.grad_accum = 8;
  const std::size_t pipeline = static_cast<std::size_t>(comm_group::pipeline);
  const double send = send_seconds(4096.0 * 4096 * 2);
  CHECK(check_growth(pp).exposed_by_group[pipeline] == Approx(18 * send));
  // Interleaved, 2 chunks of 8 layers: m v + p - 1 = 17 each way; the 17 sent forward are waited for, the 17
  // gradients each hide beside a chunk's forward (8 layers of 4,096 tokens, some 13 TFLOP: over 13 ms at peak).
  pp.vpp = 2;
  const comm_time i = check_growth(pp);
  CHECK(i.seconds_by_group[pipeline] == Approx(34 * send));
  CHECK(i.exposed_by_group[pipeline] == Approx(17 * send));
}
