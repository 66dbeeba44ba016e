// Each stack's collectives for one step (stack_profile::communication), counted by hand from how the stack
// schedules them: Megatron's tensor-parallel all-reduces (Korthikanti et al. 2022, Sec. 4: two in each layer's
// forward, two in its backward, of s x b x h each), DDP's buckets, llm.c's per-layer reduce-scatter, FSDP2's
// per-unit gathers and reduce-scatters, DeepSpeed ZeRO-3's gathers less the layers it keeps.
#include <catch2/catch.hpp>

#include "planner/model/model_facts.hpp"
#include "planner/profiles/deepspeed/deepspeed_state.hpp"
#include "planner/profiles/registry.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;

namespace {

step_comm comm_of(const model_spec& m, const run_config& r) {
  const stack_profile& p = profile_of(r);
  REQUIRE(p.communication != nullptr);
  return p.communication(m, r, make_precision_layout(r.precision, r.grad_dtype), describe_model(m));
}

const comm_op* op_named(const step_comm& c, std::string_view name) {
  for (const comm_op& op : c.ops)
    if (op.name == name) return &op;
  return nullptr;
}

double total_count(const step_comm& c, collective kind, comm_group g) {
  double n = 0;
  for (const comm_op& op : c.ops)
    if (op.kind == kind && op.group == g) n += op.count;
  return n;
}

}  // namespace

TEST_CASE("stack communication: Megatron's tensor parallelism, Korthikanti et al.'s 22B on 8 GPUs", "[communication][megatron]") {
  // 48 layers, h 6144, s 2048, micro-batch 4, fp16: each all-reduce moves s b h x 2 B = 100,663,296 B.
  model_spec m = test::gpt_shape(48, 6144, 64, 51200);
  run_config r = test::run_of(2048, 4, recompute_mode::full, attention_kind::flash, 0.0);
  r.profile = &profile_named("megatron");
  r.precision = precision_regime::fp16_mixed;
  r.gpus = 8, r.tp = 8;
  step_comm c = comm_of(m, r);
  const comm_op* fwd = op_named(c, "tensor.all_reduce (forward)");
  const comm_op* bwd = op_named(c, "tensor.all_reduce (backward)");
  REQUIRE(fwd);
  REQUIRE(bwd);
  CHECK(fwd->bytes == 2048.0 * 4 * 6144 * 2);
  CHECK(fwd->count == 2 * 48 * 2);  // two a layer, and again in the recomputed forward
  CHECK(fwd->window == comm_window::none);
  CHECK(bwd->count == 2 * 48);
  CHECK(bwd->window == comm_window::weight_gradients);
  // One data-parallel replica: no data-parallel collective.
  CHECK(total_count(c, collective::reduce_scatter, comm_group::data) == 0);
  CHECK(total_count(c, collective::all_reduce, comm_group::data) == 0);
  // With sequence parallelism, each forward all-reduce is an all-gather and a reduce-scatter of the same s b h
  // tensor; the backward adds the all-gather of each column-parallel input for its weight gradient: 2 + 2 more.
  r.recompute = recompute_mode::selective;
  r.sequence_parallel = true;
  c = comm_of(m, r);
  CHECK(op_named(c, "tensor.all_gather (forward)")->count == 2 * 48);
  CHECK(op_named(c, "tensor.reduce_scatter (forward)")->count == 2 * 48);
  CHECK(op_named(c, "tensor.reduce_scatter (backward)")->count == 2 * 48);
  CHECK(op_named(c, "tensor.all_gather (backward)")->count == 4 * 48);
}

TEST_CASE("stack communication: a pipeline's sends, 2 (m + p - 1) on the critical path", "[communication][megatron]") {
  model_spec m = test::gpt_shape(8, 1024, 16, 1000);
  run_config r = test::run_of(1024, 2, recompute_mode::none, attention_kind::flash, 0.0);
  r.profile = &profile_named("megatron");
  r.precision = precision_regime::megatron_bf16;
  r.gpus = 4, r.pp = 4, r.grad_accum = 8;
  const step_comm c = comm_of(m, r);
  const comm_op* send = op_named(c, "pipeline.send_recv");
  REQUIRE(send);
  CHECK(send->bytes == 1024.0 * 2 * 1024 * 2);  // one micro-batch's s x b x h activations in bf16
  CHECK(send->count == 2 * (8 + 4 - 1));
}

TEST_CASE("stack communication: PyTorch DDP's gradient all-reduce in 25 MiB buckets, GPT-2 on 8 GPUs", "[communication][hf]") {
  const model_spec m = test::data().model("gpt2").spec;
  run_config r = test::run_of(1024, 4, recompute_mode::none, attention_kind::flash, 0.0);
  r.profile = &profile_named("hf");
  r.precision = precision_regime::amp_bf16;  // fp32 parameters, so fp32 gradients
  r.gpus = 8, r.grad_accum = 2;
  const step_comm c = comm_of(m, r);
  REQUIRE(c.ops.size() == 1);
  const double grads = 124'439'808.0 * 4;  // GPT-2's 124,439,808 parameters, fp32
  const double buckets = std::ceil(grads / (25.0 * (1 << 20)));  // 19
  CHECK(c.ops[0].kind == collective::all_reduce);
  CHECK(c.ops[0].count == buckets);  // the last micro-batch only (no_sync before it)
  CHECK(c.ops[0].bytes * c.ops[0].count == Approx(grads));
  CHECK(c.ops[0].window == comm_window::last_backward);
  CHECK(c.ops[0].unhidden_count == 1);
}

TEST_CASE("stack communication: llm.c's ZeRO-1, a reduce-scatter per layer and the gathers after the update", "[communication][llmc]") {
  const model_spec m = test::data().model("gpt2").spec;
  run_config r = test::run_of(1024, 16, recompute_mode::none, attention_kind::flash, 0.0);
  r.profile = &profile_named("llmc");
  r.precision = precision_regime::bf16_mixed;
  r.gpus = 8, r.zero = 1;
  const step_comm c = comm_of(m, r);
  const comm_op* layer = op_named(c, "data.gradients (each layer)");
  REQUIRE(layer);
  CHECK(layer->kind == collective::reduce_scatter);
  CHECK(layer->count == 12);
  CHECK(layer->bytes == 7'087'872.0 * 2);  // a GPT-2 124M block's parameters (12 h^2 + 13 h), bf16
  CHECK(total_count(c, collective::all_gather, comm_group::data) == 12 + 1);
}

TEST_CASE("stack communication: FSDP2's gathers and reduce-scatters per unit and micro-batch, Llama-2-7B on 8 GPUs", "[communication][fsdp2]") {
  const model_spec m = test::data().model("llama-2-7b").spec;
  run_config r = test::run_of(4096, 1, recompute_mode::none, attention_kind::flash, 0.0);
  r.profile = &profile_named("fsdp2");
  r.precision = precision_regime::bf16_mixed;
  r.gpus = 8, r.zero = 3, r.grad_accum = 2;
  const step_comm c = comm_of(m, r);
  // A layer's 202,383,360 parameters split on dim 0 (4096 or 11008 rows: both divide by 8, no padding).
  const double layer = 202'383'360.0;
  CHECK(op_named(c, "data.all_gather (layers, forward)")->bytes == layer * 2);
  CHECK(op_named(c, "data.all_gather (layers, forward)")->count == 32 * 2);
  CHECK(op_named(c, "data.all_gather (layers, backward)")->count == 32 * 2);  // resharded after forward
  // reduce_dtype: the gradients' dtype, bf16 under bf16-mixed (Accelerate's policy, as the memory model's
  // reduce-scatter input: fsdp2_state.cpp).
  CHECK(op_named(c, "data.reduce_scatter (layers)")->bytes == layer * 2);
  CHECK(op_named(c, "data.reduce_scatter (layers)")->count == 32 * 2);       // every micro-batch
  // The embedding's gather starts each forward with nothing before it; its reduce-scatter ends each backward.
  CHECK(op_named(c, "data.all_gather (embedding, forward)")->unhidden_count == 2);
  CHECK(op_named(c, "data.reduce_scatter (embedding)")->unhidden_count == 2);
  // The head unit stays gathered from forward to backward: no backward gather of it.
  CHECK(op_named(c, "data.all_gather (head, backward)") == nullptr);
}

TEST_CASE("stack communication: DeepSpeed ZeRO-3 gathers again only the layers it released", "[communication][deepspeed]") {
  const model_spec m = test::data().model("llama-2-7b").spec;
  run_config r = test::run_of(4096, 1, recompute_mode::none, attention_kind::flash, 0.0);
  r.profile = &profile_named("deepspeed");
  r.precision = precision_regime::bf16_mixed;
  r.gpus = 8, r.zero = 3;
  const step_comm c = comm_of(m, r);
  const std::uint64_t kept = zero3_layers_kept(32, 202'383'360, 131'072'000, 1'000'000'000);
  // max_reuse_distance 1e9 elements over 2 i 202M + 2 x 131M: i = 0, 1 fit (0.26e9, 0.67e9), i = 2 does not.
  CHECK(kept == 2);
  CHECK(op_named(c, "data.all_gather (layers, forward)")->count == 32);
  CHECK(op_named(c, "data.all_gather (layers, backward)")->count == 30);
  // ZeRO-2: the gradients reduce-scattered in every micro-batch's backward, in h^2-element buckets of bf16.
  r.zero = 2, r.grad_accum = 3;
  const step_comm z2 = comm_of(m, r);
  const comm_op* rs = op_named(z2, "data.reduce_scatter (gradients)");
  REQUIRE(rs);
  CHECK(rs->count == std::ceil(6'738'415'616.0 / (4096.0 * 4096)) * 3);
  CHECK(rs->window == comm_window::backward);
  // ZeRO-1: once, at the boundary, with nothing to hide behind.
  r.zero = 1;
  CHECK(op_named(comm_of(m, r), "data.reduce_scatter (gradients)")->window == comm_window::none);
}
