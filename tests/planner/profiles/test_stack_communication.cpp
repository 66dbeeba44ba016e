// Each stack's collectives for one step (stack_profile::communication), counted by hand from how the stack
// schedules them: Megatron's tensor-parallel all-reduces (Korthikanti et al. 2022, Sec. 4: two in each layer's
// forward, two in its backward, of s x b x h each), DDP's buckets, llm.c's per-layer reduce-scatter, FSDP2's
// per-unit gathers and reduce-scatters, DeepSpeed ZeRO-3's gathers less the layers it keeps.
#include <catch2/catch.hpp>

#include "planner/model/model_facts.hpp"
#include "planner/profiles/deepspeed/deepspeed_state.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/run/pipeline.hpp"
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
  // Of the backward's four all-gathers a layer, the two of the row-parallel outputs' gradients come before the
  // GEMMs that read them (Megatron-Core mappings.py: a synchronous gather): the step waits for them. The two
  // column-parallel inputs gathered again run beside the input-gradient GEMMs.
  const comm_op* grads = op_named(c, "tensor.all_gather (backward, output gradients)");
  const comm_op* inputs = op_named(c, "tensor.all_gather (backward, inputs again)");
  REQUIRE(grads);
  REQUIRE(inputs);
  CHECK(grads->count == 2 * 48);
  CHECK(grads->window == comm_window::none);
  CHECK(inputs->count == 2 * 48);
  CHECK(inputs->window == comm_window::weight_gradients);
  CHECK(op_named(c, "tensor.reduce_scatter (backward)")->window == comm_window::weight_gradients);
  CHECK(total_count(c, collective::all_gather, comm_group::tensor) == (2 + 4) * 48);
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

TEST_CASE("stack communication: the embedding's and the head's all-reduces, on the pipeline stages that hold them", "[communication][megatron]") {
  // The vocabulary-parallel embedding all-reduces its output in forward; the head's input gradient is all-reduced in
  // backward. With one stage both run on every GPU (a tied head reads the embedding's table); with four, the first
  // stage holds the embedding and no head (the last holds the head and a copy of the table).
  const model_spec m = test::gpt_shape(8, 1024, 16, 1000);  // tied embeddings
  run_config r = test::run_of(1024, 2, recompute_mode::none, attention_kind::flash, 0.0);
  r.profile = &profile_named("megatron");
  r.precision = precision_regime::megatron_bf16;
  r.gpus = 2, r.tp = 2, r.grad_accum = 8;
  CHECK(op_named(comm_of(m, r), "tensor.all_reduce (embedding, head)")->count == 2 * 8);
  r.gpus = 8, r.pp = 4;
  const model_spec first = pipeline_stage_model(m, 0, 4, 1);
  const step_comm c = profile_of(r).communication(first, r, make_precision_layout(r.precision, r.grad_dtype),
                                                  pipeline_stage_facts(first, true, false));
  CHECK(op_named(c, "tensor.all_reduce (embedding, head)")->count == 8);
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

TEST_CASE("stack communication: context parallelism's ring of key and value blocks, Llama-2-7B", "[communication][megatron][cp]") {
  // Transformer Engine's AttnFuncWithCPAndKVP2P (Megatron-Core, cp_comm_type "p2p"): per layer and micro-batch,
  // forward cp - 1 sends of this GPU's key and value block, b x s/cp x (kv_heads x head_dim) x 2 (K and V) x 2 B;
  // backward every one of the cp steps sends, the first and last one block, the cp - 2 between two (K/V and
  // dK/dV): 2 (cp - 1) blocks, twice the forward's. Llama-2-7B: 32 layers, 32 kv heads of 128.
  const model_spec& m = test::data().model("llama-2-7b").spec;
  run_config r = test::run_of(4096, 1, recompute_mode::none, attention_kind::flash, 0.0);
  r.profile = &profile_named("megatron");
  r.precision = precision_regime::megatron_bf16;
  r.gpus = 2, r.cp = 2, r.grad_accum = 2;
  step_comm c = comm_of(m, r);
  const double block2 = 1 * 2048.0 * 2 * 4096 * 2;  // 33,554,432 B: s/cp = 2048 tokens
  const comm_op* fwd = op_named(c, "context.send_recv (forward K/V)");
  const comm_op* bwd1 = op_named(c, "context.send_recv (backward K/V or dK/dV)");
  REQUIRE(fwd);
  REQUIRE(bwd1);
  CHECK(fwd->kind == collective::send_recv);
  CHECK(fwd->group == comm_group::context);
  CHECK(fwd->bytes == block2);
  CHECK(fwd->count == 1 * 32 * 2);    // cp - 1 a layer and micro-batch
  CHECK(fwd->window == comm_window::attention_forward);
  CHECK(fwd->blocks == 2 * 32 * 2);   // each beside one of the cp steps' attention
  CHECK(bwd1->bytes == block2);
  CHECK(bwd1->count == 2 * 32 * 2);   // cp = 2: K/V at the first step, dK/dV at the last
  CHECK(bwd1->window == comm_window::attention_backward);
  CHECK(bwd1->blocks == 2 * 32 * 2);
  CHECK(op_named(c, "context.send_recv (backward K/V and dK/dV)") == nullptr);
  // cp 4: blocks of s/4 = 1024 tokens; 3 forward sends; backward 2 of one block and 2 of two, 6 blocks in all.
  r.gpus = r.cp = 4;
  c = comm_of(m, r);
  const double block4 = 1024.0 * 2 * 4096 * 2;
  CHECK(op_named(c, "context.send_recv (forward K/V)")->bytes == block4);
  CHECK(op_named(c, "context.send_recv (forward K/V)")->count == 3 * 32 * 2);
  CHECK(op_named(c, "context.send_recv (backward K/V or dK/dV)")->count == 2 * 32 * 2);
  const comm_op* both = op_named(c, "context.send_recv (backward K/V and dK/dV)");
  REQUIRE(both);
  CHECK(both->bytes == 2 * block4);
  CHECK(both->count == 2 * 32 * 2);
  double forward_bytes = 0, backward_bytes = 0;
  for (const comm_op& op : c.ops)
    if (op.group == comm_group::context)
      (op.window == comm_window::attention_forward ? forward_bytes : backward_bytes) += op.bytes * op.count;
  CHECK(backward_bytes == 2 * forward_bytes);
  // Full recomputation reruns the forward's ring in the backward.
  r.recompute = recompute_mode::full;
  CHECK(op_named(comm_of(m, r), "context.send_recv (forward K/V)")->count == 2 * 3 * 32 * 2);
  // Tensor parallelism splits the kv heads: half the block; and the tensor-parallel all-reduces move s/cp x b x h.
  r.recompute = recompute_mode::none;
  r.gpus = 8, r.tp = 2;
  c = comm_of(m, r);
  CHECK(op_named(c, "context.send_recv (forward K/V)")->bytes == block4 / 2);
  CHECK(op_named(c, "tensor.all_reduce (forward)")->bytes == 1024.0 * 1 * 4096 * 2);
  // With cp 4 x tp 2 x dp 1, the gradients stay: dp x cp = 4 GPUs reduce them.
  CHECK(total_count(c, collective::all_reduce, comm_group::data) > 0);
}

TEST_CASE("stack communication: a pipeline's sends, exposed in 1F1B, the gradients overlapped when interleaved", "[communication][megatron]") {
  // Llama-2-7B, pp 2, 8 micro-batches of s 4096: one micro-batch's [s, b, h] activations, 4096 x 4096 x 2 B.
  const model_spec& m = test::data().model("llama-2-7b").spec;
  run_config r = test::run_of(4096, 1, recompute_mode::none, attention_kind::flash, 0.0);
  r.profile = &profile_named("megatron");
  r.precision = precision_regime::megatron_bf16;
  r.gpus = 2, r.pp = 2, r.grad_accum = 8;
  step_comm c = comm_of(m, r);
  const comm_op* plain = op_named(c, "pipeline.send_recv");
  REQUIRE(plain);
  CHECK(plain->bytes == 4096.0 * 4096 * 2);
  CHECK(plain->count == 2 * (8 + 2 - 1));
  CHECK(plain->window == comm_window::none);  // batch_isend_irecv, waited for
  // Interleaved (vpp 2): overlap_p2p_comm. m v + p - 1 = 17 each way: the activations sent forward waited for
  // before their output is freed; the gradients sent back each beside the next chunk's forward, one of m v = 16.
  r.vpp = 2;
  c = comm_of(m, r);
  const comm_op* fwd = op_named(c, "pipeline.send_recv (forward)");
  const comm_op* bwd = op_named(c, "pipeline.send_recv (backward)");
  REQUIRE(fwd);
  REQUIRE(bwd);
  CHECK(fwd->count == 17);
  CHECK(fwd->window == comm_window::none);
  CHECK(bwd->count == 17);
  CHECK(bwd->window == comm_window::forward);
  CHECK(bwd->blocks == 16);
  // Context parallelism: s / cp tokens a micro-batch; with sequence parallelism a tp-th of them.
  r.vpp = 1, r.cp = 2, r.gpus = 4;
  CHECK(op_named(comm_of(m, r), "pipeline.send_recv")->bytes == 2048.0 * 4096 * 2);
  r.tp = 2, r.gpus = 8, r.sequence_parallel = true;
  CHECK(op_named(comm_of(m, r), "pipeline.send_recv")->bytes == 1024.0 * 4096 * 2);
}
