#include <catch2/catch.hpp>

#include <algorithm>

#include "planner/model/model_facts.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/memory/inventory.hpp"
#include "planner/memory/timeline.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using namespace trainplan::test;

namespace {

std::uint64_t per_layer_bytes(const model_spec& m, const run_config& r) {
  return build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype)).activations_per_layer_bytes;
}

const tensor_spec* find(const inventory& inv, const std::string& name) {
  auto it = std::find_if(inv.tensors.begin(), inv.tensors.end(), [&](const tensor_spec& t) { return t.name == name; });
  return it == inv.tensors.end() ? nullptr : &*it;
}

struct shape_case {
  std::uint64_t s, b, h, a;
};
const shape_case shape_cases[] = {{1024, 1, 768, 12}, {2048, 4, 12288, 96}, {4096, 2, 1600, 25}, {128, 8, 64, 4}};

}  // namespace

TEST_CASE("GPT layer with dropout and eager attention keeps 34sbh + 5as^2b bytes", "[activations]") {
  // Korthikanti et al. 2022, Sec. 4.1, eq. (1): 16-bit activations, 1-byte dropout masks. Megatron's
  // accounting, which our harness's layer follows too.
  for (const stack_profile* fw : {&profile_named("megatron"), &profile_named("trainplan")})
    for (const shape_case& c : shape_cases) {
      INFO(fw->name << " s=" << c.s << " b=" << c.b << " h=" << c.h << " a=" << c.a);
      model_spec m = gpt_shape(4, c.h, c.a);
      run_config r = run_of(c.s, c.b, recompute_mode::none, attention_kind::eager, 0.1);
      r.profile = fw;
      CHECK(per_layer_bytes(m, r) == 34 * c.s * c.b * c.h + 5 * c.a * c.s * c.s * c.b);
    }
}

TEST_CASE("selective recomputation drops exactly the 5as^2b term", "[activations][recompute]") {
  for (const stack_profile* fw : {&profile_named("megatron"), &profile_named("trainplan")})
    for (const shape_case& c : shape_cases) {
      model_spec m = gpt_shape(4, c.h, c.a);
      run_config r = run_of(c.s, c.b, recompute_mode::selective, attention_kind::eager, 0.1);
      r.profile = fw;
      CHECK(per_layer_bytes(m, r) == 34 * c.s * c.b * c.h);  // Korthikanti et al. 2022, Table 2
    }
}

TEST_CASE("full recomputation keeps only the layer input, 2sbh", "[activations][recompute]") {
  for (const shape_case& c : shape_cases) {
    model_spec m = gpt_shape(4, c.h, c.a);
    for (attention_kind att : {attention_kind::eager, attention_kind::flash})
      for (const stack_profile* fw : {&profile_named("megatron"), &profile_named("trainplan")}) {
        run_config r = run_of(c.s, c.b, recompute_mode::full, att, 0.1);
        r.profile = fw;
        CHECK(per_layer_bytes(m, r) == 2 * c.s * c.b * c.h);
      }
  }
}

TEST_CASE("full recomputation rebuilds one layer's working set during its backward only", "[activations][recompute]") {
  model_spec m = gpt_shape(6, 256, 4);
  run_config none = run_of(512, 2, recompute_mode::none, attention_kind::eager, 0.1);
  run_config full = none;
  full.recompute = recompute_mode::full;
  const inventory inv_full = build_inventory(m, full, make_precision_layout(full.precision, full.grad_dtype));
  const std::int64_t L = 6;
  std::uint64_t working_set = 0;
  for (const tensor_spec& t : inv_full.tensors) {
    if (!t.per_layer || t.kept_to_backward) continue;
    working_set += t.bytes;
    for (std::int64_t layer = 0; layer < L; ++layer) {
      INFO(t.name << " layer " << layer);
      CHECK(instances_live(t, event_index(event_kind::fwd_layer, layer, L)) == 1);
      CHECK(instances_live(t, event_index(event_kind::bwd_layer, layer, L)) == 1);
    }
    CHECK(instances_live(t, event_index(event_kind::loss, 0, L)) == 0);
  }
  // The working set is everything the layer would have kept without recomputation, minus its input.
  CHECK(working_set == per_layer_bytes(m, none) - 2 * 512 * 2 * 256);
}

TEST_CASE("flash attention removes every s^2 buffer and keeps an fp32 log-sum-exp", "[activations][flash]") {
  for (const shape_case& c : shape_cases) {
    model_spec m = gpt_shape(4, c.h, c.a);
    run_config r = run_of(c.s, c.b, recompute_mode::none, attention_kind::flash, 0.1);
    CHECK(per_layer_bytes(m, r) == 34 * c.s * c.b * c.h + 4 * c.a * c.s * c.b);
    const inventory inv = build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype));
    for (const tensor_spec& t : inv.tensors) {
      INFO(t.name);
      const bool has_s_squared = t.shape.size() == 4 && t.shape[2] == c.s && t.shape[3] == c.s;
      CHECK_FALSE(has_s_squared);
    }
  }
}

TEST_CASE("without dropout a GPT layer keeps 32sbh + 2as^2b", "[activations]") {
  model_spec m = gpt_shape(4, 768, 12);
  run_config r = run_of(1024, 2, recompute_mode::none, attention_kind::eager, 0.0);
  CHECK(per_layer_bytes(m, r) == 32ull * 1024 * 2 * 768 + 2ull * 12 * 1024 * 1024 * 2);
}

TEST_CASE("fp32 activations double every 16-bit buffer but not the 1-byte masks", "[activations][precision]") {
  model_spec m = gpt_shape(4, 768, 12);
  run_config r = run_of(1024, 1, recompute_mode::none, attention_kind::eager, 0.1);
  r.precision = precision_regime::fp32;
  const std::uint64_t sbh = 1024ull * 768, as2b = 12ull * 1024 * 1024;
  // 16-bit parts 32sbh + 4as^2b double; the masks (2sbh + as^2b) stay at one byte.
  CHECK(per_layer_bytes(m, r) == 2 * (32 * sbh + 4 * as2b) + 2 * sbh + as2b);
}

TEST_CASE("llama layer: norms, GQA qkv, SwiGLU gate/up/down, no dropout", "[activations]") {
  const model_spec& m = data().model("llama-3.1-8b").spec;
  run_config r = run_of(4096, 1, recompute_mode::none, attention_kind::eager, 0.0);
  const std::uint64_t s = 4096, h = 4096, f = 14336, a = 32, qkv = 4096 + 2 * 1024;
  // ln1.in, qkv_in, out_in, ln2.in, fc_in: 5 x 2sh; qkv: 2s*qkv; gate, up, down_in: 3 x 2sf; softmax 2as^2
  CHECK(per_layer_bytes(m, r) == 10 * s * h + 2 * s * qkv + 6 * s * f + 2 * a * s * s);
}

TEST_CASE("trainplan pads the vocabulary tables and logits to 128 rows", "[inventory][vocab]") {
  // llm.c's layout (train_gpt2.cu, Vp a multiple of 128), for the harness's head GEMMs: weights, gradients,
  // master copy and AdamW state grow by the padded rows of each table (tied GPT: one; untied Llama: two), the
  // logits are Vp wide. The fp32 embedding-gradient scratch keeps the V rows of real tokens. Other profiles
  // store V rows.
  const std::uint64_t V = 1000, Vp = 1024, h = 64, b = 3, s = 32;
  model_spec llama = gpt_shape(2, h, 4, V);
  llama.family = model_family::llama;
  llama.tied_embeddings = false;
  llama.dropout = 0;
  for (const model_spec& m : {gpt_shape(2, h, 4, V), llama}) {
    INFO(family_name(m.family));
    const std::uint64_t tables = m.tied_embeddings ? 1 : 2, P = count_params(m).total, Pp = P + tables * (Vp - V) * h;
    run_config r = run_of(s, b, recompute_mode::none, attention_kind::flash, 0.0);
    const precision_layout layout = make_precision_layout(r.precision, r.grad_dtype);
    const inventory inv = build_inventory(m, r, layout);
    REQUIRE(find(inv, "logits"));
    CHECK(find(inv, "logits")->shape == std::vector<std::uint64_t>{b, s, Vp});
    for (const char* name : {"weights.bf16", "master.fp32", "grads.bf16", "adam.m", "adam.v"}) {
      INFO(name);
      REQUIRE(find(inv, name));
      CHECK(find(inv, name)->shape == std::vector<std::uint64_t>{Pp});
    }
    REQUIRE(find(inv, "bwd.embed_grad_fp32"));
    CHECK(find(inv, "bwd.embed_grad_fp32")->shape == std::vector<std::uint64_t>{V * h});
    CHECK(describe_model(m).counts.total == P);  // what plan reports: the model's own parameters
    for (const stack_profile* f : {&profile_named("megatron"), &profile_named("hf")}) {
      INFO(f->name);
      run_config other = r;
      other.profile = f;
      other.precision = f->default_precision(false);
      const inventory o = build_inventory(m, other, make_precision_layout(other.precision, other.grad_dtype));
      REQUIRE(find(o, "logits"));
      CHECK(find(o, "logits")->shape == std::vector<std::uint64_t>{b, s, V});
      REQUIRE(find(o, "adam.m"));
      CHECK(find(o, "adam.m")->shape == std::vector<std::uint64_t>{P});
    }
  }
  // A vocabulary that is a multiple of 128 already is left as it is.
  const model_spec even = gpt_shape(2, h, 4, 1024);
  const run_config r = run_of(s, b, recompute_mode::none, attention_kind::flash, 0.0);
  const inventory inv = build_inventory(even, r, make_precision_layout(r.precision, r.grad_dtype));
  CHECK(find(inv, "weights.bf16")->shape == std::vector<std::uint64_t>{count_params(even).total});
}

TEST_CASE("buffers carry DESIGN.md's names, shapes and dtypes", "[inventory]") {
  model_spec m = gpt_shape(2, 64, 4, 100);
  run_config r = run_of(32, 3, recompute_mode::none, attention_kind::eager, 0.1);
  const inventory inv = build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype));
  const tensor_spec* softmax = find(inv, "layer{}.attn.softmax");
  REQUIRE(softmax);
  CHECK(softmax->shape == std::vector<std::uint64_t>{3, 4, 32, 32});
  CHECK(softmax->type == dtype::bf16);
  CHECK(softmax->instance_name(7) == "layer7.attn.softmax");
  const tensor_spec* gelu = find(inv, "layer{}.mlp.gelu_in");
  REQUIRE(gelu);
  CHECK(gelu->shape == std::vector<std::uint64_t>{3, 32, 256});
  REQUIRE(find(inv, "weights.bf16"));
  REQUIRE(find(inv, "master.fp32"));
  REQUIRE(find(inv, "grads.bf16"));
  REQUIRE(find(inv, "adam.m"));
  REQUIRE(find(inv, "adam.v"));
  // The harness's fused classifier writes the gradient over the bf16 logits: no fp32 copy, no second buffer.
  CHECK(find(inv, "logits.fp32") == nullptr);
  CHECK(find(inv, "logits.grad") == nullptr);
  REQUIRE(find(inv, "logits"));
  CHECK(find(inv, "logits")->bytes == 3ull * 32 * 128 * 2);  // V = 100 padded to 128 rows (llm.c's Vp)
  run_config megatron = r;  // Megatron's loss upcasts the logits
  megatron.profile = &profile_named("megatron");
  const inventory minv = build_inventory(m, megatron, make_precision_layout(r.precision, r.grad_dtype));
  const tensor_spec* logits_fp32 = find(minv, "logits.fp32");
  REQUIRE(logits_fp32);
  CHECK(logits_fp32->bytes == 3ull * 32 * 100 * 4);
  REQUIRE(find(minv, "logits.grad"));
  CHECK(find(inv, "layer{}.attn.lse") == nullptr);
  CHECK(find(inv, "grads.fp32") == nullptr);
}

TEST_CASE("fp8-mixed saves GEMM inputs in one byte and caches fp8 weight copies", "[inventory][precision]") {
  model_spec m = gpt_shape(2, 64, 4, 100);
  run_config r = run_of(32, 1, recompute_mode::none, attention_kind::flash, 0.0);
  r.precision = precision_regime::fp8_mixed;
  const inventory inv = build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype));
  CHECK(find(inv, "layer{}.attn.qkv_in")->type == dtype::fp8);
  CHECK(find(inv, "layer{}.mlp.proj_in")->type == dtype::fp8);
  CHECK(find(inv, "layer{}.mlp.gelu_in")->type == dtype::bf16);
  REQUIRE(find(inv, "weights.fp8"));
  CHECK(find(inv, "weights.fp8")->bytes == 2ull * 12 * 64 * 64);  // layers' GEMM weights; tied head excluded
}

TEST_CASE("foreach AdamW's sqrt(v) temporary has adam.v's size and scope, on the GPU or offloaded", "[inventory][hf]") {
  // Regression (issue 12, scripts/test.sh --sanitize): the temporary copied adam.v's scope through a
  // reference that adding the temporary had invalidated (a heap use after free when the vector grew, which
  // the small host inventory of --offload optimizer always does at that point).
  const model_spec m = tiny_model(model_family::llama);
  for (offload_mode off : {offload_mode::none, offload_mode::optimizer}) {
    run_config r = run_of(64, 2, recompute_mode::none, attention_kind::flash, 0.0);
    r.profile = &profile_named("hf");
    r.precision = precision_regime::amp_bf16;
    r.optimizer_impl = optimizer_impl_kind::foreach_impl;
    r.offload = off;
    const inventory inv = build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype));
    const std::vector<tensor_spec>& where = off == offload_mode::none ? inv.tensors : inv.host_tensors;
    auto named = [&](const std::string& name) {
      auto it = std::find_if(where.begin(), where.end(), [&](const tensor_spec& t) { return t.name == name; });
      REQUIRE(it != where.end());
      return *it;
    };
    const tensor_spec v = named("adam.v"), tmp = named("adam.foreach_sqrt_v");
    INFO("offload " << offload_name(off));
    CHECK(tmp.bytes == v.bytes);
    CHECK(tmp.scope == param_scope::all);
    CHECK(v.scope == param_scope::all);
    CHECK(tmp.lifetime == state_lifetime::optimizer_only);
  }
}
