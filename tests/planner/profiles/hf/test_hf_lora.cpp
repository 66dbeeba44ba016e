// --framework hf with LoRA through peft: which inputs the adapters save, in which dtype, and what the
// frozen base no longer saves. Derived from peft's lora.Linear.forward (a cast of the input to the fp32
// adapters, then lora_B(lora_A(x))), autocast's cached_cast (no cache for frozen weights) and autograd's
// rule of saving only what a needed gradient reads; no GPU run of these is in the shared data.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "planner/model/model_facts.hpp"
#include "planner/profiles/hf/hf_profile.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/allocator/allocator_trace.hpp"
#include "planner/allocator/caching_allocator.hpp"
#include "planner/run/lora.hpp"
#include "planner/evaluate/plan.hpp"
#include "planner/time/step_ops.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;

namespace {

using test::tensor_named;

// TinyLlama's shape (22 layers, h 2048, 32 heads, 4 kv heads) at s 2048, micro-batch 2, rank 16 on q,k,v,o.
struct lora_case {
  model_spec m = test::data().model("tinyllama-1.1b").spec;
  run_config r;
  lora_case(precision_regime p, recompute_mode rc = recompute_mode::none) {
    r = test::run_of(2048, 2, rc, attention_kind::flash, 0.0);
    r.profile = &profile_named("hf");
    r.precision = p;
    r.finetune = finetune_kind::lora;
    r.lora_rank = 16;
  }
  inventory inv() const { return build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype)); }
};

constexpr std::uint64_t b = 2, s = 2048, h = 2048, r16 = 16;

}  // namespace

TEST_CASE("hf LoRA in pure bf16: fp32 adapters, and each adapted linear saves an fp32 copy of its input", "[framework][hf][lora]") {
  const lora_case c(precision_regime::bf16);
  const inventory inv = c.inv();
  const std::uint64_t P = describe_model(c.m).counts.total, A = 22 * 16 * ((h + h) + 2 * (h + 256) + (h + h));
  // The frozen base in the model's bf16; peft's adapters, their gradients and AdamW's moments in fp32.
  REQUIRE(tensor_named(inv, "weights.bf16"));
  CHECK(tensor_named(inv, "weights.bf16")->bytes == 2 * P);
  CHECK(tensor_named(inv, "lora.weights")->bytes == 4 * A);
  CHECK(tensor_named(inv, "layer{}.lora.grads")->bytes * 22 == 4 * A);  // made layer by layer in backward
  CHECK(tensor_named(inv, "layer{}.lora.grads")->per_layer);
  CHECK(tensor_named(inv, "adam.m")->bytes == 4 * A);
  CHECK(tensor_named(inv, "adam.v")->bytes == 4 * A);
  CHECK_FALSE(tensor_named(inv, "lora.master.fp32"));
  // q, k and v each cast the norm's output to fp32 for lora_A, which saves its copy; o the attention output.
  // (The forward is listed op by op, module by module: E11's recorded history.)
  REQUIRE(inv.forward_in_program_order);
  for (const char* copy : {"layer{}.lora.q_in", "layer{}.lora.k_in", "layer{}.lora.v_in", "layer{}.lora.o_in"}) {
    INFO(copy);
    REQUIRE(tensor_named(inv, copy));
    CHECK(tensor_named(inv, copy)->shape.to_vector() == std::vector<std::uint64_t>{b, s, h});
    CHECK(tensor_named(inv, copy)->type == dtype::fp32);
    CHECK(tensor_named(inv, copy)->kept_to_backward);
  }
  for (const char* a_out : {"layer{}.lora.q_a_out", "layer{}.lora.k_a_out", "layer{}.lora.v_a_out", "layer{}.lora.o_a_out"})
    CHECK(tensor_named(inv, a_out)->shape.to_vector() == std::vector<std::uint64_t>{b, s, r16});
  // The frozen linears save no input, the frozen norms no normalised tensor; nothing for an MLP adapter.
  for (const char* gone : {"layer{}.attn.qkv_in", "layer{}.mlp.fc_in", "layer{}.mlp.down_in", "layer{}.ln1.normed",
                           "layer{}.ln2.normed", "lm_head.in", "layer{}.lora.fc_in", "layer{}.lora.down_in",
                           "layer{}.autocast.frozen_weights", "layer{}.lora.qkv_in"}) {
    INFO(gone);
    CHECK_FALSE(tensor_named(inv, gone));
  }
  CHECK(tensor_named(inv, "final_norm.normed")->momentary);  // made, and freed once the norm's output exists
  // Without checkpointing the frozen embedding's output needs no gradient: layer 0's norm saves nothing (its
  // fp32 copy and rsqrt are made for a moment).
  int norm_tensors = 0;
  for (const tensor_spec& t : inv.tensors)
    if (t.name == "layer{}.ln1.in" || t.name == "layer{}.ln1.rsqrt") {
      ++norm_tensors;
      INFO(t.name << " from layer " << t.layer_begin);
      CHECK(t.kept_to_backward == (t.layer_begin == 1));
      CHECK(t.momentary == (t.layer_begin == 0));
    }
  CHECK(norm_tensors == 4);  // each in layer 0 and from layer 1 on
  CHECK(tensor_named(inv, "layer{}.ln2.in")->layer_begin == 0);
  CHECK(tensor_named(inv, "layer{}.lora.q_in")->layer_begin == 0);
}

TEST_CASE("hf LoRA under amp-bf16: an fp32 base whose weights autocast casts anew at every GEMM", "[framework][hf][lora]") {
  const lora_case c(precision_regime::amp_bf16);
  const inventory inv = c.inv();
  const model_facts facts = describe_model(c.m);
  REQUIRE(tensor_named(inv, "weights.fp32"));
  CHECK(tensor_named(inv, "weights.fp32")->bytes == 4 * facts.counts.total);
  // Not cached (the weights need no gradient), so each layer's GEMMs keep their own bf16 copies for backward,
  // and the head its own: o, gate, up and down in every layer, q, k and v from layer 1 on (layer 0's input
  // needs no gradient, so its copies are freed once each GEMM has run: momentary).
  const std::uint64_t qkv_weights = h * c.m.qkv_width();
  const tensor_spec* casts = tensor_named(inv, "layer{}.autocast.frozen_weights");
  REQUIRE(casts);
  CHECK(casts->bytes == 2 * (facts.counts.matmul_per_layer - qkv_weights));
  CHECK(casts->per_layer);
  CHECK(casts->interval_count == 1);
  CHECK(casts->layer_begin == 0);
  int qkv_casts = 0;
  for (const tensor_spec& t : inv.tensors) {
    if (t.name != "layer{}.autocast.frozen_weights.qkv") continue;
    ++qkv_casts;
    CHECK(t.bytes == 2 * qkv_weights);
    CHECK(t.momentary == (t.layer_begin == 0));
    CHECK(t.layer_end == (t.layer_begin == 0 ? 1u : 22u));
  }
  CHECK(qkv_casts == 2);
  CHECK_FALSE(tensor_named(inv, "layer{}.autocast.weights"));
  // The fp32 adapters are leaves that require grad: autocast caches their copies, and each adapter's GEMM
  // saves its copy for its input's gradient, lora_A on q, k and v again from layer 1 on.
  const std::uint64_t a_qkv = r16 * 3 * h, all = r16 * ((h + h) + 2 * (h + 256) + (h + h));
  CHECK(tensor_named(inv, "layer{}.autocast.adapter_weights")->bytes == 2 * (all - a_qkv));
  int qkv_a_copies = 0;  // layer 0's (cached to the forward's end) and layers 1 on's (saved)
  for (const tensor_spec& t : inv.tensors)
    if (t.name == "layer{}.autocast.adapter_weights.qkv_a") {
      ++qkv_a_copies;
      CHECK(t.bytes == 2 * a_qkv);
      CHECK(t.kept_to_backward == (t.layer_begin == 1));
    }
  CHECK(qkv_a_copies == 2);
  REQUIRE(tensor_named(inv, "lm_head.autocast.weight"));
  CHECK(tensor_named(inv, "lm_head.autocast.weight")->bytes == 2 * 32000 * h);
  // lora_A's input is autocast's bf16 copy, one per module: o's too (peft casts the bf16 attention output
  // to fp32, autocast back to bf16).
  CHECK(tensor_named(inv, "layer{}.lora.qkv_in")->shape.to_vector() == std::vector<std::uint64_t>{3, b, s, h});
  CHECK(tensor_named(inv, "layer{}.lora.qkv_in")->type == dtype::bf16);
  CHECK(tensor_named(inv, "layer{}.lora.o_in")->type == dtype::bf16);
  CHECK(tensor_named(inv, "layer{}.lora.qkv_a_out")->type == dtype::bf16);
  // The residual stream is the fp32 model's.
  CHECK(tensor_named(inv, "layer{}.ln2.in")->type == dtype::fp32);
}

TEST_CASE("hf LoRA in fp32: the adapters read their input as it is, shared by q, k and v", "[framework][hf][lora]") {
  const lora_case c(precision_regime::fp32);
  const inventory inv = c.inv();
  CHECK(tensor_named(inv, "layer{}.lora.qkv_in")->shape.to_vector() == std::vector<std::uint64_t>{1, b, s, h});
  CHECK(tensor_named(inv, "layer{}.lora.qkv_in")->type == dtype::fp32);
  CHECK_FALSE(tensor_named(inv, "layer{}.lora.o_in"));  // the attention output SDPA saves anyway
  CHECK(tensor_named(inv, "layer{}.lora.o_a_out"));
}

TEST_CASE("hf LoRA with checkpointing: layer 0 saves its input, frozen casts are redone in backward", "[framework][hf][lora]") {
  const lora_case c(precision_regime::amp_bf16, recompute_mode::full);
  const inventory inv = c.inv();
  CHECK(tensor_named(inv, "layer{}.ln1.in")->layer_begin == 0);  // enable_input_require_grads
  const tensor_spec* casts = tensor_named(inv, "layer{}.autocast.frozen_weights");
  REQUIRE(casts);
  REQUIRE(casts->interval_count == 1);
  CHECK(casts->intervals[0].first_base == event_index(event_kind::bwd_layer, 0, 22));
}

TEST_CASE("hf LoRA on GPT-2 with MLP adapters: one c_attn and c_fc module, the MLP's output projection too", "[framework][hf][lora]") {
  model_spec m = test::data().model("gpt2").spec;
  run_config r = test::gpt2_lora_run();
  const inventory inv = build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype));
  CHECK(tensor_named(inv, "layer{}.lora.qkv_in")->shape.to_vector() == std::vector<std::uint64_t>{1, 4, 1024, 768});
  CHECK(tensor_named(inv, "layer{}.lora.fc_in")->shape.to_vector() == std::vector<std::uint64_t>{1, 4, 1024, 768});
  CHECK(tensor_named(inv, "layer{}.lora.proj_in")->shape.to_vector() == std::vector<std::uint64_t>{4, 1024, 3072});
  CHECK(tensor_named(inv, "layer{}.lora.proj_in")->type == dtype::bf16);
  CHECK_FALSE(tensor_named(inv, "layer{}.mlp.proj_in"));
  // LayerNorm saves its input and statistics for the input's gradient whether its weights train or not.
  CHECK(tensor_named(inv, "layer{}.ln2.stats"));
  // The embedding's dropout saves no mask: nothing before layer 0's adapters needs a gradient.
  CHECK_FALSE(tensor_named(inv, "embed.dropout_mask"));
  r.recompute = recompute_mode::full;
  CHECK(tensor_named(build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype)), "embed.dropout_mask"));
}

TEST_CASE("hf LoRA on a one-layer model saves nothing of layer 0's norm and still walks", "[framework][hf][lora]") {
  lora_case c(precision_regime::bf16);
  c.m.layers = 1;
  const inventory inv = c.inv();
  int copies = 0;
  for (const tensor_spec& t : inv.tensors)
    if (t.name == "layer{}.ln1.in") {
      ++copies;
      CHECK_FALSE(t.kept_to_backward);  // layer 0's fp32 copy, made for a moment
    }
  CHECK(copies == 1);
  CHECK(tensor_named(inv, "layer{}.ln2.in"));
  const plan_result p = evaluate_plan(c.m, c.r, test::data().gpu("h100"), test::data().calibration_for(test::data().gpu("h100")));
  CHECK(p.tensor_peak_bytes > 0);
}

namespace {

const step_op* op_named(const step_ops& ops, std::string_view name) {
  for (const step_op& o : ops.ops)
    if (o.name == name) return &o;
  return nullptr;
}

}  // namespace

TEST_CASE("hf LoRA step ops: frozen linears have no weight-gradient GEMMs, the adapters' GEMMs are counted",
          "[framework][hf][lora][time]") {
  lora_case c(precision_regime::bf16);
  const precision_layout layout = make_precision_layout(c.r.precision, c.r.grad_dtype);
  const step_ops lora = list_step_ops(c.m, c.r, layout, {1e6, 176, 1e7});
  run_config full_run = c.r;
  full_run.finetune = finetune_kind::full;
  const step_ops full = list_step_ops(c.m, full_run, layout, {1e9, 201, 1e10});
  const step_op *q_lora = op_named(lora, "attention.q_proj"), *q_full = op_named(full, "attention.q_proj");
  REQUIRE(q_lora);
  REQUIRE(q_full);
  // Forward + input gradient, against forward + input and weight gradients.
  CHECK(q_lora->flops == Approx(q_full->flops * 2.0 / 3.0));
  CHECK(q_lora->kernels == Approx(q_full->kernels * 2.0 / 3.0));
  // lora_A over q, k, v and o: [T, in] x [in, 16] each, forward and two backward GEMMs, every layer (timed
  // with the modules they wrap: q, k and v's, and o's).
  double a_flops = 0, a_kernels = 0;
  for (const step_op& o : lora.ops)
    if (o.name == "lora.A") a_flops += o.flops, a_kernels += o.kernels;
  const double T = 2.0 * 2048, in = 3.0 * 2048 + 2048;
  CHECK(a_flops == Approx(3 * 2 * T * in * 16 * 22));
  CHECK(a_kernels == Approx(3 * 4 * 22));
  CHECK_FALSE(op_named(full, "lora.A"));
  // Under autocast each frozen weight is cast every forward, and no gradient is cast back.
  lora_case amp(precision_regime::amp_bf16);
  const precision_layout amp_layout = make_precision_layout(amp.r.precision, amp.r.grad_dtype);
  run_config amp_full = amp.r;
  amp_full.finetune = finetune_kind::full;
  const step_ops amp_lora_ops = list_step_ops(amp.m, amp.r, amp_layout, {1e6, 176, 1e7});
  const step_ops amp_full_ops = list_step_ops(amp.m, amp_full, amp_layout, {1e9, 201, 1e10});
  const step_op *cast_lora = op_named(amp_lora_ops, "autocast.weight"), *cast_full = op_named(amp_full_ops, "autocast.weight");
  REQUIRE(cast_lora);
  REQUIRE(cast_full);
  CHECK(cast_lora->bytes == Approx(cast_full->bytes / 2));
  CHECK(cast_lora->kernels == Approx(cast_full->kernels / 2));
}

TEST_CASE("hf LoRA with adapters in the model's dtype (the model cast after get_peft_model)", "[framework][hf][lora]") {
  lora_case c(precision_regime::bf16);
  c.r.lora_fp32 = false;
  const inventory inv = c.inv();
  const std::uint64_t A = 22 * 16 * ((h + h) + 2 * (h + 256) + (h + h));
  CHECK(tensor_named(inv, "lora.weights")->bytes == 2 * A);
  CHECK(tensor_named(inv, "layer{}.lora.grads")->bytes * 22 == 2 * A);
  CHECK(tensor_named(inv, "adam.m")->bytes == 2 * A);
  // No cast: q, k and v's lora_A save the one bf16 norm output they share; o's input is SDPA's output.
  CHECK(tensor_named(inv, "layer{}.lora.qkv_in")->shape.to_vector() == std::vector<std::uint64_t>{1, b, s, h});
  CHECK(tensor_named(inv, "layer{}.lora.qkv_in")->type == dtype::bf16);
  CHECK_FALSE(tensor_named(inv, "layer{}.lora.o_in"));
  const gpu_spec& h100 = test::data().gpu("h100");
  lora_case fp32_adapters(precision_regime::bf16);
  CHECK(evaluate_plan(c.m, c.r, h100, test::data().calibration_for(h100)).tensor_peak_bytes <
        evaluate_plan(fp32_adapters.m, fp32_adapters.r, h100, test::data().calibration_for(h100)).tensor_peak_bytes);
}

TEST_CASE("hf LoRA with lora_dropout: each module drops out a copy of its own input and keeps a bool mask",
          "[framework][hf][lora]") {
  // Adapters in the model's bf16: without dropout q, k and v share one saved input and o reads SDPA's output.
  lora_case c(precision_regime::bf16);
  c.r.lora_fp32 = false;
  c.r.lora_targets = lora_q | lora_k | lora_v | lora_o | lora_mlp;
  const inventory without = c.inv();
  CHECK(tensor_named(without, "layer{}.lora.qkv_in")->shape.to_vector() == std::vector<std::uint64_t>{1, b, s, h});
  CHECK_FALSE(tensor_named(without, "layer{}.lora.qkv_dropout_mask"));
  // lora_dropout 0.05: nn.Dropout per module (peft's update_layer), so q, k, v each save their dropped-out
  // input, o saves one of its own, and native_dropout's bool mask is saved beside each.
  c.r.lora_dropout = 0.05;
  const inventory with = c.inv();
  const std::uint64_t f = 5632;
  CHECK(tensor_named(with, "layer{}.lora.qkv_in")->shape.to_vector() == std::vector<std::uint64_t>{3, b, s, h});
  CHECK(tensor_named(with, "layer{}.lora.qkv_in")->type == dtype::bf16);
  CHECK(tensor_named(with, "layer{}.lora.o_in")->shape.to_vector() == std::vector<std::uint64_t>{b, s, h});
  CHECK(tensor_named(with, "layer{}.lora.fc_in")->shape.to_vector() == std::vector<std::uint64_t>{2, b, s, h});
  const tensor_spec* qkv_mask = tensor_named(with, "layer{}.lora.qkv_dropout_mask");
  REQUIRE(qkv_mask);
  CHECK(qkv_mask->type == dtype::u8);
  CHECK(qkv_mask->bytes == 3 * b * s * h);
  CHECK(qkv_mask->layer_begin == 1);  // layer 0's norm output needs no gradient: its dropout saves no mask
  for (const auto& [name, bytes] : {std::pair{"layer{}.lora.o_dropout_mask", b * s * h},
                                    std::pair{"layer{}.lora.fc_dropout_mask", 2 * b * s * h},
                                    std::pair{"layer{}.lora.down_dropout_mask", b * s * f}}) {
    INFO(name);
    REQUIRE(tensor_named(with, name));
    CHECK(tensor_named(with, name)->bytes == bytes);
    CHECK(tensor_named(with, name)->layer_begin == 0);
  }
  // Under checkpointing enable_input_require_grads makes every layer's input need a gradient.
  c.r.recompute = recompute_mode::full;
  CHECK(tensor_named(c.inv(), "layer{}.lora.qkv_dropout_mask")->layer_begin == 0);
  // The step ops gain one dropout kernel per module forward and one backward, in the adapters' dtype
  // (an op in the attention's rows and one in the MLP's).
  c.r.recompute = recompute_mode::none;
  const precision_layout layout = make_precision_layout(c.r.precision, c.r.grad_dtype);
  double kernels = 0, bytes = 0;
  for (const step_op& o : list_step_ops(c.m, c.r, layout, {1e6, 176, 1e7}).ops)
    if (o.name == "lora.dropout") kernels += o.kernels, bytes += o.bytes;
  CHECK(kernels == Approx(2 * 7 * 22));
  const double T = 2.0 * 2048, in = 6.0 * 2048 + 5632;  // q, k, v, o, gate, up read h; down reads f
  CHECK(bytes == Approx(2 * T * in * (2 * 2 + 1) * 22));
  c.r.lora_dropout = 0;
  CHECK_FALSE(op_named(list_step_ops(c.m, c.r, layout, {1e6, 176, 1e7}), "lora.dropout"));
}

TEST_CASE("hf LoRA in the allocator replay: each adapter tensor, gradient and state, and each module's input copy, "
          "allocated one by one", "[framework][hf][lora][allocator]") {
  // PyTorch holds every lora_A and lora_B as its own tensor, and so their gradients and AdamW's moments: for
  // TinyLlama at rank 16 on q, k, v, o each is 128 or 16 KiB, PyTorch's small pool. One 17 MiB block instead
  // took a freed block of the loss's size in the large pool (E12, measured: +5.6%, now -2.9%).
  const lora_case c(precision_regime::bf16);
  const inventory inv = c.inv();
  const std::vector<std::uint64_t> layer = {r16 * h, h * r16, r16 * h, 256 * r16, r16 * h, 256 * r16, r16 * h, h * r16};
  CHECK(inv.adapter_layer_tensors == layer);
  std::uint64_t per_layer = 0;
  for (std::uint64_t e : layer) per_layer += e;
  CHECK(22 * per_layer == lora_params(c.m, 16, c.r.lora_targets, hf_traits));
  const allocator_schedule sched = schedule_allocations(inv, describe_model(c.m), 1, 2);
  auto sizes_of = [&](std::string_view name) {
    for (std::size_t i = 0; i < inv.tensors.size(); ++i)
      if (inv.tensors[i].name == name) return sched.sizes[i];
    return std::vector<std::uint64_t>{};
  };
  // (Each layer's gradients, made as its backward runs, are one buffer a layer: one layer's tensors.)
  for (std::string_view name : {"lora.weights", "layer{}.lora.grads", "adam.foreach_sqrt_v"}) {
    INFO(name);
    const std::vector<std::uint64_t> sizes = sizes_of(name);
    REQUIRE(sizes.size() == (name == "layer{}.lora.grads" ? 1 : 22) * layer.size());
    CHECK(sizes[0] == 4 * r16 * h);  // fp32 lora_A of q_proj
    CHECK(sizes[3] == 4 * 256 * r16);  // fp32 lora_B of k_proj
    for (std::uint64_t bytes : sizes) CHECK(caching_allocator::small_pool(bytes));
  }
  // AdamW's two moments, made together parameter by parameter (_init_group): exp_avg's instance makes both.
  const std::vector<std::uint64_t> moments = sizes_of("adam.m");
  REQUIRE(moments.size() == 2 * 22 * layer.size());
  for (std::size_t i = 0; i + 1 < moments.size(); i += 2) CHECK(moments[i] == moments[i + 1]);
  CHECK(moments[6] == 4 * 256 * r16);  // the pair of k_proj's lora_B
  CHECK(sizes_of("adam.v") == std::vector<std::uint64_t>{0});
  // peft casts the input once per adapted module (q, k, v): a [b, s, h] fp32 copy each, made module by module
  // (the forward op by op); and lora_A writes one [b, s, r] output per module.
  for (const char* m : {"q", "k", "v"}) {
    INFO(m);
    CHECK(sizes_of(fmt::format("layer{{}}.lora.{}_in", m)) == std::vector<std::uint64_t>{4 * b * s * h});
    CHECK(sizes_of(fmt::format("layer{{}}.lora.{}_a_out", m)) == std::vector<std::uint64_t>{4 * b * s * r16});
  }
  // Where the forward is coarse (autocast on a frozen fp32 base), one buffer stands for the three copies: three
  // allocations.
  lora_case amp(precision_regime::amp_bf16);
  const inventory amp_inv = amp.inv();
  REQUIRE_FALSE(amp_inv.forward_in_program_order);
  const allocator_schedule amp_sched = schedule_allocations(amp_inv, describe_model(amp.m), 1, 2);
  for (std::size_t i = 0; i < amp_inv.tensors.size(); ++i)
    if (amp_inv.tensors[i].name == "layer{}.lora.qkv_in")
      CHECK(amp_sched.sizes[i] == std::vector<std::uint64_t>(3, 2 * b * s * h));
  // A full fine-tune's buffers still stand for the model's parameter tensors.
  lora_case full(precision_regime::bf16);
  full.r.finetune = finetune_kind::full;
  CHECK(full.inv().adapter_layer_tensors.empty());
}
