// The step time of whole plans (planner/time/step_time.hpp): the ops' FLOPs against the step's, launch- and
// host-bound small models, kernel launches by phase, and the hf profile against the shared H100 runs. The
// roofline itself, on constructed ops: test_roofline.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "planner/profiles/registry.hpp"
#include "planner/evaluate/plan.hpp"
#include "planner/time/roofline.hpp"
#include "planner/measure/timing_fit.hpp"
#include "tests/support/measured_runs.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using namespace trainplan::test;

TEST_CASE("a tiny model in PyTorch eager is launch-bound", "[time][roofline]") {
  model_spec m = data().model("gpt2").spec;
  m.layers = 2, m.hidden = 64, m.heads = 2, m.kv_heads = 2, m.head_dim = 32, m.ffn = 256, m.vocab = 1000;
  run_config r;
  r.profile = &profile_named("hf");
  r.precision = precision_regime::amp_bf16;
  r.seq = 128, r.micro_batch = 1;
  const gpu_spec& gpu = data().gpu("h100");
  const plan_result p = evaluate_plan(m, r, gpu, data().calibration_for(gpu));
  const double overhead = p.time.breakdown.seconds[static_cast<int>(op_class::overhead)];
  CHECK(overhead > 0.9 * p.time.breakdown.total());
  double kernels = 0;
  for (const step_op& op : p.ops.ops) kernels += op.kernels;
  CHECK(kernels > 150);  // two layers of eager ops, forward and backward, and the optimizer's launches
}

TEST_CASE("the ops' FLOPs are the step's hardware FLOPs", "[time][flops]") {
  const gpu_spec& gpu = data().gpu("h100");
  // Mixture of Experts too: the router and each token's top-k experts (mixtral), and a shared expert
  // with its gate beside 60 routed experts (the Qwen1.5-MoE-A2.7B shape, from its config).
  model_spec qwen2_moe = data().model("qwen3-30b-a3b").spec;
  qwen2_moe.name = "qwen2-moe-shape", qwen2_moe.layers = 24, qwen2_moe.heads = qwen2_moe.kv_heads = 16;
  qwen2_moe.head_dim = 128, qwen2_moe.experts = 60, qwen2_moe.experts_per_token = 4, qwen2_moe.ffn = 1408;
  qwen2_moe.shared_expert_ffn = 5632, qwen2_moe.qk_norm = false, qwen2_moe.qkv_bias = true;
  const std::vector<model_spec> models{data().model("gpt2").spec, data().model("llama-2-7b").spec,
                                       data().model("mistral-7b").spec, data().model("mixtral-8x7b").spec, qwen2_moe};
  for (const model_spec& model : models)
    for (const stack_profile* f : {&profile_named("trainplan"), &profile_named("hf"), &profile_named("megatron")})
      for (recompute_mode rc : {recompute_mode::none, recompute_mode::full}) {
        run_config r;
        r.profile = f;
        r.precision = f->default_precision(false);
        r.recompute = rc;
        r.seq = 1024, r.micro_batch = 2, r.grad_accum = 3;
        const plan_result p = evaluate_plan(model, r, gpu, data().calibration_for(gpu));
        double flops = 0;
        for (const step_op& op : p.ops.ops) flops += op.flops;
        INFO(model.name << " " << f->name << " recompute " << static_cast<int>(rc));
        CHECK(flops == Approx(p.flops.hardware_per_step).epsilon(1e-9));
        if (model.name == "mistral-7b") {  // past its 4096-token window: skipped by flash, masked by hf
          run_config longer = r;
          longer.seq = 8192, longer.micro_batch = 1, longer.grad_accum = 1;
          const plan_result w = evaluate_plan(model, longer, gpu, data().calibration_for(gpu));
          double window_flops = 0;
          for (const step_op& op : w.ops.ops) window_flops += op.flops;
          CHECK(window_flops == Approx(w.flops.hardware_per_step).epsilon(1e-9));
        }
        if (model.is_moe() && f->name == "megatron") {  // expert parallelism moves rows, not FLOPs
          r.gpus = 4, r.ep = 4;
          const plan_result sharded = evaluate_plan(model, r, gpu, data().calibration_for(gpu));
          double ep_flops = 0;
          for (const step_op& op : sharded.ops.ops) ep_flops += op.flops;
          CHECK(ep_flops == Approx(flops).epsilon(1e-9));
        }
      }
}

TEST_CASE("hf step times of the shared H100 runs", "[measured][time][framework][hf]") {
  // data/calibration.json's hf constants for the h100 were fitted on these 14 runs and the README's two
  // quoted step times (plan calibrate --framework hf on both files): refitting gives them back, and every
  // run is within the 20%.
  const gpu_spec& gpu = data().gpu("h100");
  const calibration cal = data().calibration_for(gpu);
  std::vector<timing_observation> timed;
  std::vector<double> errors;
  for (const measured_file& f : {shared_h100_measurements(), shared_h100_step_times()})
    for (const measured_run& r : f.runs) {
      const plan_result p = evaluate_plan(r.model, r.run, gpu, cal, {timeline_detail::peak});
      timed.push_back({r.id, p.ops, p.time.peak_flops_per_s, gpu.memory_bandwidth_bytes_per_s, r.step_seconds});
      const double error = 100 * (p.time.step_seconds - r.step_seconds) / r.step_seconds;
      errors.push_back(std::abs(error));
      INFO(r.id << ": predicted " << p.time.step_seconds * 1e3 << " ms, measured " << r.step_seconds * 1e3 << " ms");
      CHECK(std::abs(error) <= 20);
    }
  REQUIRE(timed.size() == 16);
  std::sort(errors.begin(), errors.end());
  CHECK(errors[errors.size() / 2] <= 15);
  const timing_fit fit = fit_timing(timed);
  const timing_constants& k = cal.timing("hf");
  CHECK(fit.constants.gemm_efficiency == Approx(k.gemm_efficiency));
  CHECK(fit.constants.bandwidth_fraction == Approx(k.bandwidth_fraction));
  CHECK(fit.constants.kernel_seconds == Approx(k.kernel_seconds));
  CHECK(fit.constants.forward_kernel_seconds == Approx(k.forward_kernel_seconds));
  CHECK(fit.constants.backward_kernel_seconds == Approx(k.backward_kernel_seconds));
  CHECK(fit.constants.foreach_tensor_seconds == Approx(k.foreach_tensor_seconds));
}

TEST_CASE("a small model in PyTorch eager is host-bound: twice the batch costs little more", "[time][framework][hf]") {
  // The shared README: GPT-2 124M s1024 under autocast took 68.3 ms a step at b4 (S1) and 69 ms at b8:
  // the GPU waits for Python's dispatch of the forward. The roofline alone would double the kernels' time.
  const gpu_spec& gpu = data().gpu("h100");
  const calibration cal = data().calibration_for(gpu);
  const model_spec m = data().model("gpt2").spec;
  run_config r;
  r.profile = &profile_named("hf");
  r.precision = precision_regime::amp_bf16;
  r.seq = 1024, r.micro_batch = 4, r.dropout = 0.1;
  const plan_result b4 = evaluate_plan(m, r, gpu, cal);
  r.micro_batch = 8;
  const plan_result b8 = evaluate_plan(m, r, gpu, cal);
  CHECK(b4.time.breakdown.host_seconds > b4.time.breakdown.device_seconds);
  // The kernels' time nearly doubles (the optimizer's does not scale with the batch).
  CHECK(b8.time.breakdown.device_seconds > 1.6 * b4.time.breakdown.device_seconds);
  CHECK(b8.time.step_seconds < 1.2 * b4.time.step_seconds);
}

TEST_CASE("kernel launches by phase add up to the ops' kernels", "[time][ops]") {
  const gpu_spec& gpu = data().gpu("h100");
  for (const char* name : {"gpt2", "llama-3.1-8b", "mixtral-8x7b"})
    for (const stack_profile* f : {&profile_named("hf"), &profile_named("megatron"), &profile_named("llmc"), &profile_named("trainplan")})
      for (recompute_mode rc : {recompute_mode::none, recompute_mode::full}) {
        const model_spec m = data().model(name).spec;
        if (f->name == "llmc" && m.family != model_family::gpt) continue;
        run_config r;
        r.profile = f;
        r.precision = f->default_precision(false);
        r.seq = 1024, r.micro_batch = 2, r.grad_accum = 2, r.recompute = rc;
        INFO(name << " " << f->name << (rc == recompute_mode::full ? " recomputed" : ""));
        const plan_result p = evaluate_plan(m, r, gpu, data().calibration_for(gpu));
        double kernels = 0;
        for (const step_op& op : p.ops.ops) {
          kernels += op.kernels;
          CHECK(op.forward_share >= 0);
          CHECK(op.forward_share <= 1);
        }
        CHECK(p.ops.launches.total() == Approx(kernels));
        // Full recomputation reruns every layer's forward: as many launches as the layers' first forward.
        if (rc == recompute_mode::full) CHECK(p.ops.launches.recompute > 0.8 * p.ops.launches.forward);
        else CHECK(p.ops.launches.recompute == 0);
      }
}

TEST_CASE("eager attention's batched GEMMs are one launch each", "[time][ops]") {
  // torch.matmul over [b, heads, s, d] is one cublasGemmStridedBatched call, not b x heads launches.
  const gpu_spec& gpu = data().gpu("h100");
  run_config r;
  r.profile = &profile_named("hf");
  r.precision = precision_regime::amp_bf16;
  r.attention = attention_kind::eager;
  r.seq = 1024, r.micro_batch = 4;
  const model_spec m = data().model("gpt2").spec;
  const plan_result p = evaluate_plan(m, r, gpu, data().calibration_for(gpu));
  const step_op& scores = *std::find_if(p.ops.ops.begin(), p.ops.ops.end(),
                                        [](const step_op& op) { return op.name == "attention.scores"; });
  CHECK(scores.kernels == 3.0 * static_cast<double>(m.layers));  // forward, and backward's two
  CHECK(scores.forward_share == Approx(1.0 / 3));
}

TEST_CASE("Megatron's unfused attention drops the probabilities out in a kernel of its own", "[time][ops]") {
  // CoreAttention (and Transformer Engine's UnfusedDotProductAttention): the fused scale-mask-softmax, then torch's
  // dropout on its output. Per layer and pass, N = b x heads x s^2 probabilities: forward reads N x 2 B and writes
  // N x 2 B and a one-byte mask; backward reads the gradient and the mask and writes N x 2 B: 5N bytes each way.
  const gpu_spec& gpu = data().gpu("h100");
  const model_spec m = gpt_shape(2, 256, 4);
  run_config r;
  r.profile = &profile_named("megatron");
  r.precision = r.profile->default_precision(false);  // bf16 activations
  r.attention = attention_kind::eager;
  r.dropout = 0.1;
  r.seq = 128, r.micro_batch = 2;
  const double N = 2.0 * 4 * 128 * 128, pass = 5 * N;
  auto dropout_op = [&](const plan_result& p) {
    return std::find_if(p.ops.ops.begin(), p.ops.ops.end(), [](const step_op& op) { return op.name == "attention.dropout"; });
  };
  plan_result p = evaluate_plan(m, r, gpu, data().calibration_for(gpu));
  REQUIRE(dropout_op(p) != p.ops.ops.end());
  CHECK(dropout_op(p)->bytes == Approx(2 * 2 * pass));  // 2 layers, forward and backward
  CHECK(dropout_op(p)->kernels == 2 * 2);
  // Selective recomputation reruns the attention core, its dropout with it.
  r.recompute = recompute_mode::selective;
  p = evaluate_plan(m, r, gpu, data().calibration_for(gpu));
  CHECK(dropout_op(p)->bytes == Approx(2 * 3 * pass));
  // Without dropout, and in the harness (its softmax kernel drops out in place), no such kernel.
  r.dropout = 0;
  p = evaluate_plan(m, r, gpu, data().calibration_for(gpu));
  CHECK(dropout_op(p) == p.ops.ops.end());
  r.dropout = 0.1;
  r.profile = &profile_named("trainplan");
  r.precision = r.profile->default_precision(false);
  p = evaluate_plan(m, r, gpu, data().calibration_for(gpu));
  CHECK(dropout_op(p) == p.ops.ops.end());
}
