// --framework hf on Qwen2- and Mistral-shaped models and long sequences, from the sources (transformers
// 5.x masking_utils / modeling_qwen2 / configuration_qwen2, torch 2.11 autograd and autocast); no GPU run
// of these is shared yet.
#include <catch2/catch.hpp>

#include "planner/profiles/hf/activations_hf.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/evaluate/plan.hpp"
#include "planner/time/roofline.hpp"
#include "tests/support/plan_helpers.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;

namespace {

using test::inventory_of;
using test::plan_of;
using test::tensor_named;

run_config hf_run(std::uint64_t seq, precision_regime p, attention_kind a = attention_kind::flash,
                  recompute_mode rc = recompute_mode::none) {
  run_config r = test::run_of(seq, 1, rc, a, 0.0);
  r.profile = &profile_named("hf");
  r.precision = p;
  return r;
}

// The collector's small Llama (S6..S10's shape).
model_spec small_llama() {
  model_spec m = test::data().model("llama-2-7b").spec;
  m.name = "small-llama", m.layers = 4, m.hidden = 1024, m.heads = 16, m.kv_heads = 4, m.head_dim = 64;
  m.ffn = 2816, m.vocab = 32000;
  return m;
}

const step_op* op_named(const plan_result& p, std::string_view name) {
  for (const step_op& op : p.ops.ops)
    if (op.name == name) return &op;
  return nullptr;
}

}  // namespace

TEST_CASE("hf eager attention keeps the float causal mask, [b,1,s,s] in the embeddings' dtype", "[framework][hf][eager]") {
  const model_spec m = small_llama();
  // bf16: masking_utils.eager_mask's torch.where writes the broadcast [b, 1, s, s] in bf16.
  run_config r = hf_run(8192, precision_regime::bf16, attention_kind::eager);
  r.micro_batch = 2;
  const inventory inv = inventory_of(m, r);
  const tensor_spec* mask = tensor_named(inv, "mask.eager");
  REQUIRE(mask);
  CHECK(mask->shape.to_vector() == std::vector<std::uint64_t>{2, 1, 8192, 8192});
  CHECK(mask->type == dtype::bf16);
  CHECK(mask->intervals[0].last_base == event_index(event_kind::fwd_head, 0, 4));
  // Under autocast the model (and its embeddings' output) is fp32.
  CHECK(tensor_named(inventory_of(m, hf_run(8192, precision_regime::amp_bf16, attention_kind::eager)), "mask.eager")->type ==
        dtype::fp32);
  // SDPA without a window gets no mask (is_causal). GPT-2's eager attention gets it too (transformers 5.x's
  // GPT2Model builds it with create_causal_mask: S2's recorded history shows the 1 MiB bool mask, then the
  // 16 MiB fp32 [4, 1, 1024, 1024] one kept through the forward).
  CHECK_FALSE(tensor_named(inventory_of(m, hf_run(8192, precision_regime::bf16)), "mask.eager"));
  const inventory gpt2_eager =
      inventory_of(test::data().model("gpt2").spec, hf_run(1024, precision_regime::amp_bf16, attention_kind::eager));
  const tensor_spec* gpt_mask = tensor_named(gpt2_eager, "mask.eager");
  REQUIRE(gpt_mask);
  CHECK(gpt_mask->shape.to_vector() == std::vector<std::uint64_t>{1, 1, 1024, 1024});  // hf_run's micro-batch 1
  CHECK(gpt_mask->type == dtype::fp32);
  // Checkpointing passes it to every layer's recomputation: it lives to the end of backward, and the
  // recomputing layer's peak holds it.
  run_config gc = r;
  gc.recompute = recompute_mode::full;
  const plan_result with = plan_of(m, gc);
  REQUIRE(phase_name(with.timeline.peak).starts_with("backward layer"));
  bool live = false;
  for (const live_tensor& t : with.timeline.live_at_peak) live = live || t.spec->name == "mask.eager";
  CHECK(live);
  CHECK(tensor_named(with.inv, "mask.eager")->intervals[0].last_base == event_index(event_kind::bwd_embed, 0, 4));
}

TEST_CASE("hf tied embeddings: the embedding's backward adds a whole [V, h] gradient into the head's", "[framework][hf][tied]") {
  const model_spec& qwen = test::data().model("qwen2.5-0.5b").spec;  // tied, vocab 151,936
  REQUIRE(qwen.tied_embeddings);
  run_config r = hf_run(128, precision_regime::bf16);
  r.optimizer_impl = optimizer_impl_kind::fused;  // no foreach temporary: the optimizer step is not the peak
  const plan_result p = plan_of(qwen, r);
  const tensor_spec* sum = tensor_named(p.inv, "grads.embedding.incoming");
  REQUIRE(sum);
  CHECK(sum->lifetime == state_lifetime::micro_batch);  // every micro-batch, the first too
  CHECK(sum->bytes == 151936ull * 896 * 2);
  CHECK(sum->intervals[0].first_base == event_index(event_kind::bwd_embed, 0, 24));
  CHECK(sum->intervals[0].last_base == event_index(event_kind::bwd_embed, 0, 24));
  // At a short sequence the step peaks there: every gradient, the AdamW state, and the embedding's own
  // gradient before AccumulateGrad adds it in (272 MB, 5% of this peak).
  CHECK(phase_name(p.timeline.peak) == "backward embedding");
  CHECK(p.category_bytes(tensor_category::gradients) == 494032768ull * 2 + sum->bytes);
  // Untied models steal the embedding's gradient as their .grad: a sum only in later micro-batches.
  const plan_result untied_plan = plan_of(test::data().model("qwen2.5-7b").spec, r);  // outlives the pointer into it
  const tensor_spec* untied = tensor_named(untied_plan.inv, "grads.embedding.incoming");
  REQUIRE(untied);
  CHECK(untied->lifetime == state_lifetime::later_micro_batches);
}

TEST_CASE("hf SDPA handed a sliding-window mask computes every tile: twice a causal kernel's time", "[framework][hf][window][time]") {
  const model_spec& mistral = test::data().model("mistral-7b").spec;  // window 4096
  model_spec causal = mistral;
  causal.sliding_window_tokens = 8192;  // s 4096 < window: is_causal, no mask
  const run_config r = hf_run(4096, precision_regime::bf16);
  const plan_result masked = plan_of(mistral, r), plain = plan_of(causal, r);
  const step_op* a = op_named(masked, "attention.sdpa");
  const step_op* b = op_named(plain, "attention.sdpa");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->every_tile);
  CHECK_FALSE(b->every_tile);
  CHECK(a->flops == b->flops);  // the same square counted (planner/time/flops.hpp's hardware FLOPs)
  const gpu_spec& h100 = test::data().gpu("h100");
  const roofline_rates rates(*h100.peak_flops_per_s(dtype::bf16), h100.memory_bandwidth_bytes_per_s,
                             test::data().calibration_for(h100).timing("hf"), false);
  CHECK(rates.seconds(*a) == Approx(2 * rates.seconds(*b)));
}

TEST_CASE("hf Qwen2 under autocast: each q/k/v bias is cast forward and its gradient cast back", "[framework][hf][qwen2][time]") {
  model_spec with_bias = test::data().model("qwen2.5-0.5b").spec;
  model_spec without = with_bias;
  without.qkv_bias = false;
  const double L = static_cast<double>(with_bias.layers);
  const run_config amp = hf_run(2048, precision_regime::amp_bf16);
  CHECK(plan_of(with_bias, amp).ops.launches.forward - plan_of(without, amp).ops.launches.forward == 3 * L);
  // Backward: the bias gradient's reduction (addmm's sum over tokens) and its cast back to fp32.
  CHECK(plan_of(with_bias, amp).ops.launches.backward - plan_of(without, amp).ops.launches.backward == 6 * L);
  // In a bf16 model nothing is cast; the reduction stays.
  const run_config bf16 = hf_run(2048, precision_regime::bf16);
  CHECK(plan_of(with_bias, bf16).ops.launches.forward == plan_of(without, bf16).ops.launches.forward);
  CHECK(plan_of(with_bias, bf16).ops.launches.backward - plan_of(without, bf16).ops.launches.backward == 3 * L);
}

TEST_CASE("hf long sequences: cuDNN for 16-bit SDPA at any length, exact buffer sizes at s 131072", "[framework][hf][long]") {
  const model_spec& qwen7 = test::data().model("qwen2.5-7b").spec;  // 28 heads of 128, 4 kv heads
  const run_config r = hf_run(131072, precision_regime::bf16, attention_kind::flash, recompute_mode::full);
  CHECK(hf_sdpa_backend(qwen7, r, make_precision_layout(r.precision, r.grad_dtype)) == sdpa_backend::fused);
  const inventory inv = inventory_of(qwen7, r);
  // cuDNN's [b, h, s, 1] fp32 statistics, grouped k and v (enable_gqa), cos and sin of [1, s, d] once.
  CHECK(tensor_named(inv, "layer{}.attn.lse")->bytes == 28ull * 131072 * 4);
  CHECK(tensor_named(inv, "layer{}.attn.k_rope")->shape.to_vector() == std::vector<std::uint64_t>{1, 4, 131072, 128});
  CHECK(tensor_named(inv, "rope.cos_sin")->bytes == 2ull * 131072 * 128 * 2);
  // ForCausalLMLoss's fp32 [b*s, V] buffers: 79.7 GB each, no wrap-around.
  CHECK(tensor_named(inv, "loss.log_probs")->bytes == 131072ull * 152064 * 4);
  // Eager attention's fp32 probabilities at that length, 1.9 TB a layer, are still exact.
  const inventory eager = inventory_of(qwen7, hf_run(131072, precision_regime::bf16, attention_kind::eager));
  CHECK(tensor_named(eager, "layer{}.attn.probs")->bytes == 28ull * 131072 * 131072 * 4);
  CHECK(tensor_named(eager, "mask.eager")->bytes == 131072ull * 131072 * 2);
}
