// --framework hf with a sliding window: a sequence at least as long as a Mistral-style window makes
// transformers build the mask (masking_utils._ignore_causal_mask_sdpa skips it
// only while kv_length < sliding_window), so sdpa_attention_forward repeats k and v to every head and SDPA
// saves the mask as a bias. From the sources (transformers 5.x, torch 2.11); no GPU run of it is shared.
#include <catch2/catch.hpp>

#include "planner/profiles/hf/activations_hf.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/evaluate/plan.hpp"
#include "tests/support/plan_helpers.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;

namespace {

using test::inventory_of;
using test::plan_of;
using test::tensor_named;

std::vector<std::uint64_t> shape_of(const inventory& inv, std::string_view name) {
  const tensor_spec* t = tensor_named(inv, name);
  return t ? t->shape.to_vector() : std::vector<std::uint64_t>{};
}

run_config mistral_run(std::uint64_t seq, precision_regime p = precision_regime::bf16) {
  run_config r = test::run_of(seq, 1, recompute_mode::none, attention_kind::flash, 0.0);
  r.profile = &profile_named("hf");
  r.precision = p;
  return r;
}

}  // namespace

TEST_CASE("hf sliding window: below the window SDPA keeps grouped k and v, from it on a mask and repeated heads",
          "[framework][hf][window]") {
  const model_spec& m = test::data().model("mistral-7b").spec;  // window 4096, 32 heads, 8 kv heads
  REQUIRE(m.sliding_window_tokens == 4096);
  const inventory below = inventory_of(m, mistral_run(4095));
  CHECK_FALSE(hf_sliding_window_mask(m, mistral_run(4095)));
  CHECK(shape_of(below, "layer{}.attn.k_rope") == std::vector<std::uint64_t>{1, 8, 4095, 128});
  CHECK_FALSE(tensor_named(below, "layer{}.attn.mask_bias"));
  CHECK_FALSE(tensor_named(below, "mask.sliding_window"));

  const run_config at = mistral_run(4096);
  CHECK(hf_sliding_window_mask(m, at));
  CHECK(hf_sdpa_backend(m, at, make_precision_layout(at.precision, at.grad_dtype)) == sdpa_backend::fused);
  const inventory inv = inventory_of(m, at);
  CHECK(shape_of(inv, "layer{}.attn.k_rope") == std::vector<std::uint64_t>{1, 32, 4096, 128});
  CHECK(shape_of(inv, "layer{}.attn.v") == std::vector<std::uint64_t>{1, 32, 4096, 128});
  // The bias in q's dtype, one per layer, kept to backward; the logical_not a forward temporary.
  const tensor_spec* bias = tensor_named(inv, "layer{}.attn.mask_bias");
  REQUIRE(bias);
  CHECK(bias->shape.to_vector() == std::vector<std::uint64_t>{1, 1, 4096, 4096});
  CHECK(bias->type == dtype::bf16);
  CHECK(bias->per_layer);
  CHECK(bias->kept_to_backward);
  REQUIRE(tensor_named(inv, "layer{}.fwd.mask_not"));
  CHECK(tensor_named(inv, "layer{}.fwd.mask_not")->type == dtype::u8);
  // The bool mask itself: s x s bytes (expanded over the batch), for the forward only.
  const tensor_spec* mask = tensor_named(inv, "mask.sliding_window");
  REQUIRE(mask);
  CHECK(mask->bytes == 4096ull * 4096);
  CHECK(mask->intervals[0].last_base == event_index(event_kind::fwd_head, 0, 32));
  // Checkpointing keeps it as an argument of every layer's recomputation.
  run_config gc = at;
  gc.recompute = recompute_mode::full;
  CHECK(tensor_named(inventory_of(m, gc), "mask.sliding_window")->intervals[0].last_base == event_index(event_kind::bwd_embed, 0, 32));
  // The mask costs memory: the same run below the window at the same length is smaller.
  model_spec wider = m;
  wider.sliding_window_tokens = 8192;
  const gpu_spec& h100 = test::data().gpu("h100");
  CHECK(evaluate_plan(m, at, h100, test::data().calibration_for(h100)).tensor_peak_bytes >
        evaluate_plan(wider, at, h100, test::data().calibration_for(h100)).tensor_peak_bytes + 32ull * 4096 * 4096 * 2);
}

TEST_CASE("hf sliding window in fp32: repeated heads let the memory-efficient kernel take it, its bias padded to 8",
          "[framework][hf][window]") {
  model_spec m = test::data().model("mistral-7b").spec;
  m.layers = 2;
  const run_config r = mistral_run(4100, precision_regime::fp32);
  CHECK(hf_sdpa_backend(m, r, make_precision_layout(r.precision, r.grad_dtype)) == sdpa_backend::efficient);
  const inventory inv = inventory_of(m, r);
  CHECK(shape_of(inv, "layer{}.attn.mask_bias") == std::vector<std::uint64_t>{1, 1, 4100, 4104});
  CHECK(tensor_named(inv, "layer{}.attn.mask_bias")->type == dtype::fp32);
  // Without the mask, fp32 with grouped heads takes the math path.
  m.sliding_window_tokens = 0;
  CHECK(hf_sdpa_backend(m, r, make_precision_layout(r.precision, r.grad_dtype)) == sdpa_backend::math);
}

TEST_CASE("hf sliding window: no SDPA mask for eager attention or Gemma 2's alternating layers", "[framework][hf][window]") {
  const model_spec& mistral = test::data().model("mistral-7b").spec;
  run_config eager = mistral_run(4096);
  eager.attention = attention_kind::eager;
  CHECK_FALSE(hf_sliding_window_mask(mistral, eager));
  CHECK_FALSE(tensor_named(inventory_of(mistral, eager), "layer{}.attn.mask_bias"));
  const model_spec& gemma = test::data().model("gemma-2-9b").spec;
  REQUIRE(gemma.sliding_window_global_every == 2);
  CHECK_FALSE(hf_sliding_window_mask(gemma, mistral_run(8192)));
}
