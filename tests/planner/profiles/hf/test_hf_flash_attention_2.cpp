// --attention flash_attention_2 under --framework hf: the flash-attn package as transformers' flash_attention_forward
// calls it, against its source (flash_attn_interface.py's FlashAttnFunc.save_for_backward; csrc/flash_attn/
// flash_api.cpp's mha_fwd and mha_bwd allocations).
#include <catch2/catch.hpp>

#include "planner/profiles/registry.hpp"
#include "tests/support/plan_helpers.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;

namespace {

run_config hf_run(attention_kind attention, std::uint64_t seq = 4096) {
  run_config r = test::run_of(seq, 2, recompute_mode::none, attention, 0.0);
  r.profile = &profile_named("hf");
  r.precision = precision_regime::bf16;
  return r;
}

std::vector<std::uint64_t> shape_of(const inventory& inv, std::string_view name) {
  const tensor_spec* t = test::tensor_named(inv, name);
  return t ? t->shape.to_vector() : std::vector<std::uint64_t>{};
}

}  // namespace

TEST_CASE("flash_attention_2 saves its rng_state beside SDPA's tensors, and its backward's workspaces", "[unit][hf][attention]") {
  // Llama-3.2-3B: 24 query heads of 128, 8 key/value heads.
  const model_spec& m = test::data().model("llama-3.2-3b").spec;
  REQUIRE(m.heads == 24);
  REQUIRE(m.kv_heads == 8);
  const inventory fa2 = test::inventory_of(m, hf_run(attention_kind::flash_attention_2));
  const inventory sdpa = test::inventory_of(m, hf_run(attention_kind::flash));
  // Both save an fp32 log-sum-exp [b, heads, s].
  CHECK(shape_of(fa2, "layer{}.attn.lse") == std::vector<std::uint64_t>{2, 24, 4096});
  CHECK(shape_of(sdpa, "layer{}.attn.lse") == std::vector<std::uint64_t>{2, 24, 4096});
  // mha_fwd: rng_state = torch::empty({2}, int64) on the GPU, saved by FlashAttnFunc.
  CHECK(shape_of(fa2, "layer{}.attn.rng_state") == std::vector<std::uint64_t>{2});
  CHECK(test::tensor_named(fa2, "layer{}.attn.rng_state")->type == dtype::i64);
  CHECK(test::tensor_named(sdpa, "layer{}.attn.rng_state") == nullptr);
  // mha_bwd: softmax_d [b, h, round(s, 128)] fp32, dq_accum [b, round(s, 128), h, round(d, 32)] fp32, and with
  // fewer key heads dk_expanded and dv_expanded per query head.
  CHECK(shape_of(fa2, "layer{}.bwd.fa_softmax_d") == std::vector<std::uint64_t>{2, 24, 4096});
  CHECK(shape_of(fa2, "layer{}.bwd.fa_dq_accum") == std::vector<std::uint64_t>{2, 4096, 24, 128});
  CHECK(test::tensor_named(fa2, "layer{}.bwd.fa_dq_accum")->bytes == 2ull * 4096 * 24 * 128 * 4);
  CHECK(test::tensor_named(fa2, "layer{}.bwd.fa_dk_expanded") != nullptr);
  CHECK(test::tensor_named(fa2, "layer{}.bwd.fa_dv_expanded") != nullptr);
  // A sequence not a multiple of 128 is rounded up in the workspaces only.
  const inventory odd = test::inventory_of(m, hf_run(attention_kind::flash_attention_2, 1000));
  CHECK(shape_of(odd, "layer{}.bwd.fa_dq_accum") == std::vector<std::uint64_t>{2, 1024, 24, 128});
  CHECK(shape_of(odd, "layer{}.attn.lse") == std::vector<std::uint64_t>{2, 24, 1000});
}

TEST_CASE("flash_attention_2 takes a sliding window itself: no mask is built", "[unit][hf][attention]") {
  const model_spec& m = test::data().model("mistral-7b").spec;
  REQUIRE(m.sliding_window_tokens > 0);
  const std::uint64_t seq = m.sliding_window_tokens;  // SDPA gets the mask from here on
  const inventory sdpa = test::inventory_of(m, hf_run(attention_kind::flash, seq));
  const inventory fa2 = test::inventory_of(m, hf_run(attention_kind::flash_attention_2, seq));
  CHECK(test::tensor_named(sdpa, "layer{}.attn.mask_bias") != nullptr);
  CHECK(test::tensor_named(fa2, "layer{}.attn.mask_bias") == nullptr);
  CHECK(test::tensor_named(fa2, "mask.sliding_window") == nullptr);
}
