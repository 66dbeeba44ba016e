// --packing under the stacks that run transformers' modules, against its sources: transformers 5's
// modeling_flash_attention_utils.py (_is_packed_sequence, prepare_fa_kwargs_from_position_ids: cu_seqlens from
// position_ids, then flash_attn_varlen_func) and masking_utils.py (find_packed_sequence_indices: a block-diagonal
// causal mask for SDPA); flash-attn's flash_attn_interface.py (FlashAttnVarlenFunc's saved tensors) and
// csrc/flash_attn/flash_api.cpp (mha_varlen_fwd's softmax_lse [heads, total_q]; mha_varlen_bwd's softmax_d
// [heads, total_q + 128 n] and dq_accum [total_q + 128 n, heads, head_size_rounded]).
#include <catch2/catch.hpp>

#include "planner/profiles/hf/hf_sdpa.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/util/input_error.hpp"
#include "tests/support/plan_helpers.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;

namespace {

// Llama-3.2-3B (24 query heads of 128, 8 key heads) in bf16, two rows of 4096.
run_config packed_run(attention_kind attention, std::uint64_t doc_tokens, std::string_view stack = "hf") {
  run_config r = test::run_of(4096, 2, recompute_mode::none, attention, 0.0);
  r.profile = &profile_named(stack);
  r.precision = precision_regime::bf16;
  r.packing_doc_tokens = doc_tokens;
  return r;
}

const model_spec& llama() { return test::data().model("llama-3.2-3b").spec; }

std::vector<std::uint64_t> shape_of(const inventory& inv, std::string_view name) {
  const tensor_spec* t = test::tensor_named(inv, name);
  return t ? t->shape.to_vector() : std::vector<std::uint64_t>{};
}

const step_op* op_named(const step_ops& ops, std::string_view name) {
  for (const step_op& op : ops.ops)
    if (op.name == name) return &op;
  return nullptr;
}

}  // namespace

TEST_CASE("packed under flash_attention_2: flash_attn_varlen_func's tensors", "[unit][hf][packing]") {
  const model_spec& m = llama();
  REQUIRE(m.heads == 24);
  REQUIRE(m.head_dim == 128);
  const inventory packed = test::inventory_of(m, packed_run(attention_kind::flash_attention_2, 1024));
  // Two rows of four documents: n = 8. cu_seqlens [n + 1] int32, one a layer.
  CHECK(shape_of(packed, "layer{}.attn.cu_seqlens") == std::vector<std::uint64_t>{9});
  CHECK(test::tensor_named(packed, "layer{}.attn.cu_seqlens")->type == dtype::i32);
  CHECK(test::tensor_named(packed, "layer{}.attn.cu_seqlens")->bytes == 9 * 4);
  // softmax_lse [heads, total tokens] fp32: the bytes of [b, heads, s].
  CHECK(test::tensor_named(packed, "layer{}.attn.lse")->bytes == 24ull * 2 * 4096 * 4);
  // The backward's workspaces over b s + 128 n = 8192 + 1024 rows.
  CHECK(shape_of(packed, "layer{}.bwd.fa_softmax_d") == std::vector<std::uint64_t>{24, 9216});
  CHECK(shape_of(packed, "layer{}.bwd.fa_dq_accum") == std::vector<std::uint64_t>{9216, 24, 128});
  CHECK(test::tensor_named(packed, "layer{}.bwd.fa_dq_accum")->bytes == 9216ull * 24 * 128 * 4);
  // The collator's position_ids [b, s] int64; no mask (flash-attn takes cu_seqlens).
  CHECK(shape_of(packed, "batch.position_ids") == std::vector<std::uint64_t>{2, 4096});
  CHECK(test::tensor_named(packed, "mask.packed") == nullptr);
  CHECK(test::tensor_named(packed, "layer{}.attn.mask_bias") == nullptr);
  // Unpacked: none of these, and the padded workspaces of mha_bwd.
  const inventory plain = test::inventory_of(m, packed_run(attention_kind::flash_attention_2, 0));
  CHECK(test::tensor_named(plain, "layer{}.attn.cu_seqlens") == nullptr);
  CHECK(test::tensor_named(plain, "batch.position_ids") == nullptr);
  CHECK(shape_of(plain, "layer{}.bwd.fa_softmax_d") == std::vector<std::uint64_t>{2, 24, 4096});
}

TEST_CASE("packed under flash_attention_2: four documents of 1024 cost a quarter of a row's attention FLOPs", "[unit][hf][packing]") {
  const model_spec& m = llama();
  const plan_result plain = test::plan_of(m, packed_run(attention_kind::flash_attention_2, 0));
  const plan_result packed = test::plan_of(m, packed_run(attention_kind::flash_attention_2, 1024));
  const step_op* a = op_named(plain.ops, "attention.sdpa");
  const step_op* b = op_named(packed.ops, "attention.sdpa");
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  // sum over documents of d^2 = 4 x 1024^2 = 4096^2 / 4; each document's causal tiles only.
  CHECK(b->flops == Approx(a->flops / 4).epsilon(1e-12));
  CHECK_FALSE(b->every_tile);
  CHECK(b->bytes == Approx(a->bytes));
  // prepare_fa_kwargs_from_position_ids's kernels in each layer's forward.
  CHECK(op_named(packed.ops, "attention.cu_seqlens") != nullptr);
  CHECK(op_named(plain.ops, "attention.cu_seqlens") == nullptr);
  // Shorter attention, shorter step.
  CHECK(packed.time.step_seconds < plain.time.step_seconds);
}

TEST_CASE("packed under sdpa: a block-diagonal mask, k and v repeated, every tile computed", "[unit][hf][packing]") {
  const model_spec& m = llama();
  const run_config r = packed_run(attention_kind::flash, 1024);
  REQUIRE(hf_packing_mask(r));
  const inventory packed = test::inventory_of(m, r);
  // sdpa_mask's bool [b, 1, s, s] (one per row: the documents differ), made a bf16 bias each layer saves.
  CHECK(shape_of(packed, "mask.packed") == std::vector<std::uint64_t>{2, 1, 4096, 4096});
  CHECK(test::tensor_named(packed, "mask.packed")->type == dtype::u8);
  CHECK(shape_of(packed, "layer{}.attn.mask_bias") == std::vector<std::uint64_t>{2, 1, 4096, 4096});
  CHECK(test::tensor_named(packed, "layer{}.attn.mask_bias")->type == dtype::bf16);
  // use_gqa_in_sdpa needs no mask: repeat_kv copies k and v to all 24 heads.
  CHECK(shape_of(packed, "layer{}.attn.k_rope") == std::vector<std::uint64_t>{2, 24, 4096, 128});
  const inventory plain = test::inventory_of(m, packed_run(attention_kind::flash, 0));
  CHECK(shape_of(plain, "layer{}.attn.k_rope") == std::vector<std::uint64_t>{2, 8, 4096, 128});
  CHECK(test::tensor_named(plain, "mask.packed") == nullptr);
  // is_causal is False with a mask: the kernel computes the whole row's square, as many counted FLOPs as the
  // unpacked row's but every tile of them.
  const plan_result unpacked_plan = test::plan_of(m, packed_run(attention_kind::flash, 0));
  const plan_result packed_plan = test::plan_of(m, r);
  const step_op* a = op_named(unpacked_plan.ops, "attention.sdpa");
  const step_op* b = op_named(packed_plan.ops, "attention.sdpa");
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(b->flops == Approx(a->flops));
  CHECK(b->every_tile);
  CHECK_FALSE(a->every_tile);
}

TEST_CASE("packed under sdpa: the mask sends sm_80 to the memory-efficient kernel, cuDNN takes it on sm_90", "[unit][hf][packing]") {
  const model_spec& m = llama();
  run_config r = packed_run(attention_kind::flash, 1024);
  const precision_layout layout = make_precision_layout(r.precision, r.grad_dtype);
  r.gpu_capability = {9, 0};
  CHECK(hf_sdpa_backend(m, r, layout) == sdpa_backend::fused);
  // FlashAttention takes no mask (sdp_utils.cpp check_for_attn_mask); the efficient kernel pads s to 8.
  r.gpu_capability = {8, 0};
  CHECK(hf_sdpa_backend(m, r, layout) == sdpa_backend::efficient);
  r.packing_doc_tokens = 0;
  CHECK(hf_sdpa_backend(m, r, layout) == sdpa_backend::fused);
}

TEST_CASE("documents as long as the row are no packing", "[unit][hf][packing]") {
  const model_spec& m = llama();
  for (const attention_kind a : {attention_kind::flash, attention_kind::flash_attention_2}) {
    const plan_result plain = test::plan_of(m, packed_run(a, 0));
    const plan_result whole = test::plan_of(m, packed_run(a, 4096));
    CHECK(whole.peak_bytes == plain.peak_bytes);
    CHECK(whole.time.step_seconds == plain.time.step_seconds);
  }
}

TEST_CASE("packing is refused with eager attention and under stacks with kernels of their own", "[unit][hf][packing]") {
  const model_spec& m = llama();
  // Each stack's own precision and sharding (hf: bf16; FSDP2 and DeepSpeed: bf16-mixed under ZeRO-3).
  struct stack_run {
    std::string_view stack;
    precision_regime precision;
    int zero;
  };
  for (const stack_run& s : {stack_run{"hf", precision_regime::bf16, 0}, stack_run{"fsdp2", precision_regime::bf16_mixed, 3},
                             stack_run{"deepspeed", precision_regime::bf16_mixed, 3}}) {
    INFO(s.stack);
    const precision_layout layout = make_precision_layout(s.precision, grad_dtype_choice::automatic);
    run_config eager = packed_run(attention_kind::eager, 1024, s.stack), fa2 = packed_run(attention_kind::flash_attention_2, 1024, s.stack);
    eager.precision = fa2.precision = s.precision;
    eager.zero = fa2.zero = s.zero;
    eager.gpus = fa2.gpus = 8;
    CHECK_THROWS_WITH(profile_named(s.stack).check(m, eager, layout), Catch::Contains("--packing") && Catch::Contains("eager"));
    CHECK_NOTHROW(profile_named(s.stack).check(m, fa2, layout));
  }
  const precision_layout bf16 = make_precision_layout(precision_regime::bf16, grad_dtype_choice::automatic);
  CHECK_THROWS_WITH(profile_named("megatron").check(m, packed_run(attention_kind::flash, 1024, "megatron"), bf16),
                    Catch::Contains("--packing"));
}

TEST_CASE("the report states the packing assumption and that it is unmeasured", "[unit][hf][packing]") {
  const model_spec& m = llama();
  const precision_layout layout = make_precision_layout(precision_regime::bf16, grad_dtype_choice::automatic);
  for (const attention_kind a : {attention_kind::flash, attention_kind::flash_attention_2}) {
    std::vector<std::string> lines;
    profile_named("hf").describe(m, packed_run(a, 1000), layout, lines);
    std::string all;
    for (const std::string& l : lines) all += l + "\n";
    CHECK_THAT(all, Catch::Contains("4 documents of 1000 tokens and one of 96"));
    CHECK_THAT(all, Catch::Contains("not yet checked against a measurement"));
  }
}
