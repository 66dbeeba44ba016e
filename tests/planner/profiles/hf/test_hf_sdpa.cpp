// SDPA's backend under --framework hf by the GPU's compute capability, against torch 2.11's choice
// (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp: priority_order and check_prefer_cudnn_attention, the
// can_use_*_attention filters) and what each kernel saves (the memory-efficient forward's logsumexp
// [B, heads, ceil(M / 32) x 32] fp32, kAlignLSE = 32; FlashAttention's and cuDNN's [B, heads, M] fp32).
#include <catch2/catch.hpp>

#include "planner/profiles/hf/hf_sdpa.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/util/input_error.hpp"
#include "tests/support/plan_helpers.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;

namespace {

run_config hf_run(precision_regime precision, compute_capability cc, std::uint64_t seq = 1024, double dropout = 0.0) {
  run_config r = test::run_of(seq, 2, recompute_mode::none, attention_kind::flash, dropout);
  r.profile = &profile_named("hf");
  r.precision = precision;
  r.gpu_capability = cc;
  return r;
}

sdpa_backend backend(const model_spec& m, const run_config& r) {
  return hf_sdpa_backend(m, r, make_precision_layout(r.precision, r.grad_dtype));
}

// A Llama of 4 heads (as many key heads) of the given head size.
model_spec llama_heads_of(std::uint64_t head_dim) {
  model_spec m = test::tiny_model(model_family::llama);
  m.kv_heads = m.heads = 4;
  m.head_dim = head_dim;
  m.hidden = 4 * head_dim;
  return m;
}

constexpr compute_capability unknown{}, sm70{7, 0}, sm75{7, 5}, sm80{8, 0}, sm86{8, 6}, sm89{8, 9}, sm90{9, 0}, sm100{10, 0};

}  // namespace

TEST_CASE("SDPA's backend follows the GPU's compute capability as torch 2.11 picks it", "[unit][hf][attention]") {
  const model_spec& mha = test::data().model("llama-2-7b").spec;  // 32 heads of 128, as many key heads
  REQUIRE(mha.kv_heads == mha.heads);
  const model_spec& gqa = test::data().model("tinyllama-1.1b").spec;  // 32 query heads, 4 key heads
  REQUIRE(gqa.kv_heads < gqa.heads);
  // 16-bit from sm_80: cuDNN first on sm_90 and sm_100, FlashAttention first on sm_80-sm_89; both fused, as on an
  // H100 when the GPU is not known.
  for (const compute_capability cc : {unknown, sm80, sm86, sm89, sm90, sm100}) {
    INFO(cc.major << "." << cc.minor);
    CHECK(backend(mha, hf_run(precision_regime::amp_bf16, cc)) == sdpa_backend::fused);
    CHECK(backend(gqa, hf_run(precision_regime::amp_bf16, cc)) == sdpa_backend::fused);
  }
  CHECK(hf_sdpa_kernel_name(sdpa_backend::fused, hf_run(precision_regime::amp_bf16, sm90)) == "cuDNN/FlashAttention");
  CHECK(hf_sdpa_kernel_name(sdpa_backend::fused, hf_run(precision_regime::amp_bf16, sm80)).starts_with("FlashAttention"));
  // sm_70 and sm_75: neither fused kernel runs; the memory-efficient kernel takes fp16 (without grouped heads, as
  // the fp32 inventory on the H100 shows), and bf16 goes to the math path.
  for (const compute_capability cc : {sm70, sm75}) {
    INFO(cc.major << "." << cc.minor);
    CHECK(backend(mha, hf_run(precision_regime::amp_fp16, cc)) == sdpa_backend::efficient);
    CHECK(backend(gqa, hf_run(precision_regime::amp_fp16, cc)) == sdpa_backend::math);
    CHECK(backend(mha, hf_run(precision_regime::bf16, cc)) == sdpa_backend::math);
  }
  // fp32 is the same everywhere: memory-efficient without grouped heads, math with them.
  CHECK(backend(mha, hf_run(precision_regime::fp32, sm75)) == sdpa_backend::efficient);
  CHECK(backend(gqa, hf_run(precision_regime::fp32, sm90)) == sdpa_backend::math);
}

TEST_CASE("FlashAttention's limits send a run to the memory-efficient kernel where cuDNN would take it", "[unit][hf][attention]") {
  // A head size in (192, 224]: FlashAttention's backward refuses it on sm_86-sm_89, not on sm_80.
  const model_spec d200 = llama_heads_of(200);
  CHECK(backend(d200, hf_run(precision_regime::bf16, sm86)) == sdpa_backend::efficient);
  CHECK(backend(d200, hf_run(precision_regime::bf16, sm89)) == sdpa_backend::efficient);
  CHECK(backend(d200, hf_run(precision_regime::bf16, sm80)) == sdpa_backend::fused);
  CHECK(backend(d200, hf_run(precision_regime::bf16, sm90)) == sdpa_backend::fused);
  // 256 on sm_89: without dropout FlashAttention trains it, with dropout not.
  const model_spec d256 = llama_heads_of(256);
  CHECK(backend(d256, hf_run(precision_regime::bf16, sm89)) == sdpa_backend::fused);
  CHECK(backend(d256, hf_run(precision_regime::bf16, sm89, 1024, 0.1)) == sdpa_backend::efficient);
  // A sliding-window mask (Mistral 7B at a sequence of its 4,096-token window): FlashAttention takes no mask, cuDNN
  // takes it as a bias; the memory-efficient kernel takes it with k and v repeated to every head.
  const model_spec& mistral = test::data().model("mistral-7b").spec;
  REQUIRE(mistral.sliding_window_tokens == 4096);
  CHECK(backend(mistral, hf_run(precision_regime::bf16, sm90, 4096)) == sdpa_backend::fused);
  CHECK(backend(mistral, hf_run(precision_regime::bf16, sm80, 4096)) == sdpa_backend::efficient);
  CHECK(backend(mistral, hf_run(precision_regime::bf16, sm80, 4095)) == sdpa_backend::fused);  // no mask below the window
}

TEST_CASE("the saved log-sum-exp and mask follow the backend the GPU gets", "[unit][hf][attention]") {
  // Llama-2-7B, micro-batch 2, 100 tokens, amp-fp16: on sm_75 the memory-efficient kernel's logsumexp is
  // [2, 32, ceil(100 / 32) x 32 = 128] fp32 = 32,768 bytes; on sm_80 FlashAttention's is [2, 32, 100] = 25,600 bytes.
  const model_spec& m = test::data().model("llama-2-7b").spec;
  const inventory t4 = test::inventory_of(m, hf_run(precision_regime::amp_fp16, sm75, 100));
  const inventory a100 = test::inventory_of(m, hf_run(precision_regime::amp_fp16, sm80, 100));
  REQUIRE(test::tensor_named(t4, "layer{}.attn.lse") != nullptr);
  REQUIRE(test::tensor_named(a100, "layer{}.attn.lse") != nullptr);
  CHECK(test::tensor_named(t4, "layer{}.attn.lse")->shape.to_vector() == std::vector<std::uint64_t>{2, 32, 128});
  CHECK(test::tensor_named(t4, "layer{}.attn.lse")->bytes == 32768);
  CHECK(test::tensor_named(a100, "layer{}.attn.lse")->shape.to_vector() == std::vector<std::uint64_t>{2, 32, 100});
  CHECK(test::tensor_named(a100, "layer{}.attn.lse")->bytes == 25600);
  // Mistral at 4,100 tokens on sm_80: the memory-efficient kernel saves the mask as a bias padded to a multiple of
  // 8 keys, [2, 1, 4100, 4104] in bf16; cuDNN on sm_90 saves it as it is, [2, 1, 4100, 4100].
  const model_spec& mistral = test::data().model("mistral-7b").spec;
  const inventory ampere = test::inventory_of(mistral, hf_run(precision_regime::bf16, sm80, 4100));
  const inventory hopper = test::inventory_of(mistral, hf_run(precision_regime::bf16, sm90, 4100));
  REQUIRE(test::tensor_named(ampere, "layer{}.attn.mask_bias") != nullptr);
  REQUIRE(test::tensor_named(hopper, "layer{}.attn.mask_bias") != nullptr);
  CHECK(test::tensor_named(ampere, "layer{}.attn.mask_bias")->shape.to_vector() == std::vector<std::uint64_t>{2, 1, 4100, 4104});
  CHECK(test::tensor_named(hopper, "layer{}.attn.mask_bias")->shape.to_vector() == std::vector<std::uint64_t>{2, 1, 4100, 4100});
}

TEST_CASE("the flash-attn package is refused below compute capability 8.0", "[unit][hf][attention]") {
  const model_spec& m = test::data().model("llama-2-7b").spec;
  run_config r = hf_run(precision_regime::amp_fp16, sm75);
  r.attention = attention_kind::flash_attention_2;
  const precision_layout layout = make_precision_layout(r.precision, r.grad_dtype);
  CHECK_THROWS_WITH(check_hf_attention("hf", m, layout, r),
                    Catch::Contains("--attention flash_attention_2") && Catch::Contains("8.0") && Catch::Contains("7.5"));
  r.gpu_capability = sm80;
  CHECK_NOTHROW(check_hf_attention("hf", m, layout, r));
}
