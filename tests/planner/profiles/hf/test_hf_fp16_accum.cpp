// --framework hf under fp16 autocast with torch.amp.GradScaler (--precision amp-fp16) and with gradient
// accumulation (--grad-accum N), read from the sources (no GPU run of either is in the shared data):
// autocast's op lists and weight cache are the same for fp16 as for bf16 (aten/src/ATen/autocast_mode.cpp),
// SDPA's fused backends take both 16-bit dtypes (cuda/sdp_utils.cpp), GradScaler keeps two scalars and
// unscales in place (torch/amp/grad_scaler.py), and AccumulateGrad steals a micro-batch's first gradient and
// adds later ones in place (torch/csrc/autograd/functions/accumulate_grad.h).
#include <catch2/catch.hpp>

#include <algorithm>

#include "planner/model/model_facts.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/profiles/hf/activations_hf.hpp"
#include "planner/allocator/allocator_trace.hpp"
#include "planner/evaluate/plan.hpp"
#include "planner/time/roofline.hpp"
#include "planner/time/step_ops.hpp"
#include "planner/memory/timeline.hpp"
#include "tests/support/plan_helpers.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using test::inventory_of;
using test::plan_of;
using test::tensor_named;

namespace {

// The collector's small GPT-2 (tied embeddings) and small Llama (untied), as tests/data/measurements has them.
model_spec gpt2_small() { return test::data().model("gpt2").spec; }
model_spec llama_small() {
  model_spec m = test::data().model("tinyllama-1.1b").spec;
  m.layers = 4, m.hidden = 1024, m.heads = 16, m.kv_heads = 4, m.head_dim = 64, m.ffn = 2816;
  return m;
}

run_config hf_run(precision_regime p, std::uint64_t seq, std::uint64_t micro_batch, std::uint64_t accum = 1,
                  optimizer_impl_kind impl = optimizer_impl_kind::foreach_impl) {
  run_config r = test::run_of(seq, micro_batch, recompute_mode::none, attention_kind::flash, 0.0);
  r.profile = &profile_named("hf");
  r.precision = p;
  r.grad_accum = accum;
  r.optimizer_impl = impl;
  return r;
}

const timeline_point& point(const timeline_result& tl, int step, std::uint64_t mb, event_kind k, std::uint64_t layer = 0) {
  auto it = std::find_if(tl.points.begin(), tl.points.end(), [&](const timeline_point& p) {
    return p.step == step && p.micro_batch == mb && p.kind == k && p.layer == layer;
  });
  REQUIRE(it != tl.points.end());
  return *it;
}

const step_op* op_named(const step_ops& ops, std::string_view name) {
  for (const step_op& op : ops.ops)
    if (op.name == name) return &op;
  return nullptr;
}

}  // namespace

TEST_CASE("hf amp-fp16 saves what amp-bf16 saves, in fp16, and adds GradScaler's four scalars", "[framework][hf][fp16]") {
  for (const model_spec& m : {gpt2_small(), llama_small()}) {
    INFO(m.name);
    const run_config bf = hf_run(precision_regime::amp_bf16, 1024, 4), fp = hf_run(precision_regime::amp_fp16, 1024, 4);
    const inventory a = inventory_of(m, bf), b = inventory_of(m, fp);
    // The same SDPA backend: cuDNN and FlashAttention take fp16 as they take bf16.
    CHECK(hf_sdpa_backend(m, fp, make_precision_layout(fp.precision, fp.grad_dtype)) == sdpa_backend::fused);
    for (const tensor_spec& t : a.tensors) {
      INFO(t.name);
      const tensor_spec* u = tensor_named(b, t.name);
      REQUIRE(u);
      CHECK(u->shape.to_vector() == t.shape.to_vector());
      CHECK(u->bytes == t.bytes);
      CHECK(u->type == (t.type == dtype::bf16 ? dtype::fp16 : t.type));
    }
    // GradScaler: the scale (fp32) and growth tracker (int32) kept from the first scale(loss); inv_scale
    // and found_inf (each with _MultiDeviceReplicator's copy) within step(). No per-parameter buffer.
    REQUIRE(b.tensors.size() == a.tensors.size() + 4);
    const tensor_spec* scale = tensor_named(b, "grad_scaler.scale");
    const tensor_spec* tracker = tensor_named(b, "grad_scaler.growth_tracker");
    REQUIRE(scale);
    REQUIRE(tracker);
    CHECK(scale->bytes == 4);
    CHECK(tracker->type == dtype::i32);
    CHECK(scale->lifetime == state_lifetime::whole_run);
    for (const char* name : {"grad_scaler.inv_scale", "grad_scaler.found_inf"}) {
      INFO(name);
      REQUIRE(tensor_named(b, name));
      CHECK(tensor_named(b, name)->bytes == 8);
      CHECK(tensor_named(b, name)->lifetime == state_lifetime::optimizer_only);
    }
    // So the tensor peak (the loss's backward) is amp-bf16's and the two kept scalars.
    const plan_result pa = plan_of(m, bf), pb = plan_of(m, fp);
    CHECK(describe_point(pb.timeline.peak, 1) == describe_point(pa.timeline.peak, 1));
    CHECK(pb.tensor_peak_bytes == pa.tensor_peak_bytes + 8);
  }
}

TEST_CASE("hf amp-fp16 step: GradScaler unscales every fp32 gradient once, and foreach AdamW waits for .item()",
          "[framework][hf][fp16][time]") {
  const model_spec m = gpt2_small();
  const double P = static_cast<double>(describe_model(m).counts.total);
  const double tensors = static_cast<double>(describe_model(m).tensor_instances);
  const plan_result foreach = plan_of(m, hf_run(precision_regime::amp_fp16, 1024, 4, 2));
  const step_op* unscale = op_named(foreach.ops, "grad_scaler.unscale");
  REQUIRE(unscale);
  CHECK(unscale->grad_scaler);
  CHECK(unscale->bytes == 2 * 4 * P);  // _amp_foreach_non_finite_check_and_unscale_: read and write, in place
  // inv_scale (double, reciprocal, float), found_inf, two copies, the check (a depth-1 foreach over 148
  // tensors, 124M elements: 6 launches of 320 chunks of 65,536), the update.
  CHECK(unscale->kernels == 4 + 2 + 6 + 1);
  CHECK(foreach.ops.launches.scaler == unscale->kernels);
  CHECK(foreach.ops.host_waits_before_optimizer);
  const step_op* scale = op_named(foreach.ops, "grad_scaler.scale");
  REQUIRE(scale);
  CHECK(scale->kernels == 2 * 2);  // scale(loss) and its backward, each micro-batch
  // Fused AdamW unscales in its own kernel (_step_supports_amp_scaling): no .item() before it; the
  // inf check still runs, and _fused_adamw takes found_inf off every step count (_foreach_sub_, 3 launches).
  const plan_result fused = plan_of(m, hf_run(precision_regime::amp_fp16, 1024, 4, 2, optimizer_impl_kind::fused));
  CHECK_FALSE(fused.ops.host_waits_before_optimizer);
  REQUIRE(op_named(fused.ops, "grad_scaler.unscale"));
  CHECK(op_named(fused.ops, "grad_scaler.unscale")->kernels == 2 + 2 + 2 + 6 + 3 + 1);
  CHECK(tensors == 148);
  // No scaler under bf16 autocast.
  const plan_result bf16 = plan_of(m, hf_run(precision_regime::amp_bf16, 1024, 4, 2));
  CHECK_FALSE(op_named(bf16.ops, "grad_scaler.unscale"));
  CHECK_FALSE(bf16.ops.host_waits_before_optimizer);
  CHECK(bf16.ops.launches.scaler == 0);
}

TEST_CASE("a host that waits for the device before the optimizer no longer hides its preamble", "[time][roofline][fp16]") {
  // 10 ms of device work in forward and in backward, 1 ms in the GradScaler's check and 10 ms in the
  // optimizer; 50 foreach tensors of 100 us (5 ms of Python before the optimizer's kernels); little host
  // work per launch. Without a wait the preamble hides behind the backward's queue: the device's 31 ms.
  // With .item() the device drains first (21 ms), then the host's 5 ms, then the optimizer's 10 ms.
  timing_constants k;
  k.bandwidth_fraction = 0.8, k.kernel_seconds = 0, k.step_seconds = 0.002;
  k.forward_kernel_seconds = 30e-6, k.backward_kernel_seconds = 5e-6, k.foreach_tensor_seconds = 100e-6;
  const double bandwidth = 3.35e12, peak = 989.4e12;
  step_ops ops;
  auto add = [&](op_class cls, double seconds, float forward_share, bool scaler) {
    step_op op;
    op.cls = cls;
    op.bytes = seconds * bandwidth * 0.8;
    op.forward_share = forward_share;
    op.grad_scaler = scaler;
    ops.ops.push_back(op);
  };
  add(op_class::elementwise, 0.020, 0.5f, false);
  add(op_class::optimizer, 0.001, 1.0f, true);
  add(op_class::optimizer, 0.010, 1.0f, false);
  ops.launches = {33, 0, 200, 1, 7};
  ops.foreach_tensors = 50;
  CHECK(estimate_op_times(ops, peak, bandwidth, k).total() == Approx(0.002 + 0.031));
  ops.host_waits_before_optimizer = true;
  const op_time_breakdown waits = estimate_op_times(ops, peak, bandwidth, k);
  CHECK(waits.total() == Approx(0.002 + 0.021 + 0.005 + 0.010));
  CHECK(waits.device_seconds == Approx(0.031));
}

TEST_CASE("accumulated micro-batches alternate: the host issues micro-batch k+1's forward during k's backward",
          "[time][roofline][accumulation]") {
  // Four micro-batches, each a host-bound forward (10 ms of Python, 2 ms on the device) and a device-bound
  // backward (20 ms on the device, 1 ms of host). F1 B1 F2 B2 ...: after the first forward's 10 ms the
  // device never waits (every later forward is issued while the previous backward runs): 10 + 6 + 80 + the
  // optimizer's 1 ms. Issuing all four forwards before the first backward would take 40 + 80 + 1.
  timing_constants k;
  k.bandwidth_fraction = 0.8, k.kernel_seconds = 0, k.step_seconds = 0.002;
  k.forward_kernel_seconds = 100e-6, k.backward_kernel_seconds = 10e-6;
  const double bandwidth = 3.35e12, peak = 989.4e12;
  step_ops ops;
  step_op pass;
  pass.cls = op_class::elementwise;
  pass.bytes = (0.008 + 0.080) * bandwidth * 0.8;
  pass.forward_share = static_cast<float>(0.008 / 0.088);
  ops.ops.push_back(pass);
  step_op opt;
  opt.cls = op_class::optimizer;
  opt.bytes = 0.001 * bandwidth * 0.8;
  ops.ops.push_back(opt);
  ops.launches = {400, 0, 400, 1};
  ops.micro_batches = 4;
  CHECK(estimate_op_times(ops, peak, bandwidth, k).total() == Approx(0.002 + 0.010 + 0.006 + 0.080 + 0.001).epsilon(1e-4));
  // One micro-batch of the same totals is the old schedule: the host's 40 ms forward, then the device.
  ops.micro_batches = 1;
  CHECK(estimate_op_times(ops, peak, bandwidth, k).total() == Approx(0.002 + 0.040 + 0.080 + 0.001).epsilon(1e-4));
}

TEST_CASE("hf accumulation step: AccumulateGrad adds each trained gradient in place after the first micro-batch",
          "[framework][hf][accumulation][time]") {
  const model_spec m = gpt2_small();
  const double P = static_cast<double>(describe_model(m).counts.total);
  const double tensors = static_cast<double>(describe_model(m).tensor_instances);
  const plan_result one = plan_of(m, hf_run(precision_regime::amp_bf16, 1024, 2, 1));
  const plan_result four = plan_of(m, hf_run(precision_regime::amp_bf16, 1024, 2, 4));
  // One micro-batch: nothing is added to an existing .grad, and the loss is not divided.
  REQUIRE(op_named(one.ops, "autograd.accumulate_grad"));
  CHECK(op_named(one.ops, "autograd.accumulate_grad")->kernels == 0);
  CHECK(op_named(one.ops, "loss.accumulation_divide")->kernels == 0);
  const step_op* add = op_named(four.ops, "autograd.accumulate_grad");
  REQUIRE(add);
  CHECK(add->kernels == 3 * tensors);    // micro-batches 2 to 4, one add_ per parameter
  CHECK(add->bytes == 3 * 3 * 4 * P);    // fp32 gradients under autocast: two reads and a write
  REQUIRE(op_named(four.ops, "loss.accumulation_divide"));
  CHECK(op_named(four.ops, "loss.accumulation_divide")->kernels == 4 * 2);  // loss / 4 and its backward
  CHECK(four.ops.micro_batches == 4);
  CHECK(four.ops.launches.backward == 4 * one.ops.launches.backward + 3 * tensors + 4);
  CHECK(four.ops.launches.forward == 4 * one.ops.launches.forward + 4);
}

TEST_CASE("hf accumulation: the token table's incoming gradient before AccumulateGrad adds it", "[framework][hf][accumulation]") {
  const std::uint64_t table = 50257ull * 768;
  // GPT-2 (tied): the embedding's backward makes a [V, h] gradient in every micro-batch and adds it to the
  // head's contribution, which in later micro-batches is a second table beside .grad.
  const inventory gpt = inventory_of(gpt2_small(), hf_run(precision_regime::amp_bf16, 1024, 2, 4));
  const tensor_spec* incoming = tensor_named(gpt, "grads.embedding.incoming");
  const tensor_spec* held = tensor_named(gpt, "grads.head.incoming");
  REQUIRE(incoming);
  REQUIRE(held);
  CHECK(incoming->bytes == 4 * table);  // fp32, the parameters' dtype under autocast
  CHECK(incoming->lifetime == state_lifetime::micro_batch);
  CHECK(held->bytes == 4 * table);
  CHECK(held->lifetime == state_lifetime::later_micro_batches);
  CHECK(held->intervals[0].first_base == tensor_named(gpt, "grads.head")->intervals[0].first_base);
  // Llama (untied): only later micro-batches (the first one's is .grad itself, grads.embedding).
  const inventory llama = inventory_of(llama_small(), hf_run(precision_regime::bf16, 2048, 1, 4));
  REQUIRE(tensor_named(llama, "grads.embedding.incoming"));
  CHECK(tensor_named(llama, "grads.embedding.incoming")->bytes == 2 * 32000 * 1024);
  CHECK(tensor_named(llama, "grads.embedding.incoming")->lifetime == state_lifetime::later_micro_batches);
  CHECK_FALSE(tensor_named(llama, "grads.head.incoming"));

  // The timeline: micro-batch 2's embedding backward holds one table more than micro-batch 1's, untied or
  // tied (micro-batch 1 already has the tied table's incoming gradient beside the held contribution).
  for (const model_spec& m : {gpt2_small(), llama_small()}) {
    INFO(m.name);
    const run_config r = hf_run(precision_regime::amp_bf16, 256, 1, 2);
    const inventory inv = inventory_of(m, r);
    const timeline_result tl = walk_timeline(inv, 2, timeline_detail::every_event);
    const std::uint64_t v_h = m.vocab * m.hidden;
    CHECK(point(tl, 2, 1, event_kind::bwd_embed).live_bytes - point(tl, 2, 0, event_kind::bwd_embed).live_bytes == 4 * v_h);
    // And without accumulation nothing changes: one micro-batch never holds a later one's buffers.
    const timeline_result single = walk_timeline(inv, 1, timeline_detail::every_event);
    CHECK(point(single, 2, 0, event_kind::bwd_embed).live_bytes == point(tl, 2, 0, event_kind::bwd_embed).live_bytes);
  }
}

TEST_CASE("hf accumulation with a short sequence peaks in micro-batch 2's embedding backward", "[framework][hf][accumulation]") {
  // The small Llama in bf16, s 64, fused AdamW (no foreach temporary): the activations and the loss are
  // small, the bf16 table is 62.5 MiB, so the peak is where a later micro-batch's embedding backward holds
  // .grad and the incoming table: micro-batch 1's embedding backward plus one table.
  const model_spec m = llama_small();
  const run_config r = hf_run(precision_regime::bf16, 64, 1, 2, optimizer_impl_kind::fused);
  const inventory inv = inventory_of(m, r);
  const timeline_result full = walk_timeline(inv, 2, timeline_detail::every_event);
  const timeline_result fast = walk_timeline(inv, 2, timeline_detail::peak);
  CHECK(describe_point(full.peak, 2) == "step 2 and later, micro-batch 2 of 2, backward embedding");
  CHECK(full.peak.live_bytes == point(full, 2, 0, event_kind::bwd_embed).live_bytes + 2 * 32000 * 1024);
  CHECK(fast.peak.live_bytes == full.peak.live_bytes);
  CHECK(describe_point(fast.peak, 2) == describe_point(full.peak, 2));
  // The caching allocator replay allocates it too, in micro-batch 2 only: one table above one micro-batch's
  // peak, which is micro-batch 1's embedding backward (.grad just stolen beside the optimizer's state).
  const allocator_replay two = replay_allocator(inv, describe_model(m), 2), one = replay_allocator(inv, describe_model(m), 1);
  CHECK(describe_point(walk_timeline(inv, 1, timeline_detail::peak).peak, 1) == "step 2 and later, backward embedding");
  CHECK(two.peak_allocated_bytes - one.peak_allocated_bytes == 2 * 32000 * 1024);
}
