// torch.compile under --framework hf (planner/profiles/hf/hf_compile.hpp): what a compiled Llama layer saves, derived
// by hand from the rules of the min-cut partitioner (torch/_functorch/partitioners.py,
// min_cut_rematerialization_partition), the eager inventory untouched without --compile, and what is refused
// (torchtune's compiled runs: tests/planner/profiles/torchtune/). Llama-3.2-3B: h = 3,072, f = 8,192, 24 heads, 8
// key-value heads of 128, V = 128,256; bf16 weights, seq 4096, micro-batch 2: T = 8,192 tokens.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "planner/profiles/registry.hpp"
#include "planner/util/input_error.hpp"
#include "tests/support/plan_helpers.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;

namespace {

constexpr std::uint64_t h = 3072, f = 8192, q_width = 24 * 128, kv_width = 8 * 128, heads = 24, T = 2 * 4096;

model_spec llama_3b() {
  const model_spec& m = test::data().model("llama-3.2-3b").spec;
  REQUIRE(m.hidden == h);
  REQUIRE(m.ffn == f);
  return m;
}

// A bf16 Llama-3.2-3B run under transformers' modules (seq 4096, micro-batch 2, fused AdamW).
run_config bf16_run(compile_scope compile, loss_kind loss = loss_kind::standard,
                         recompute_mode rc = recompute_mode::none) {
  run_config r = test::run_of(4096, 2, rc, attention_kind::flash, 0.0);
  r.profile = &profile_named("hf");
  r.precision = precision_regime::bf16;
  r.optimizer_impl = optimizer_impl_kind::fused;
  r.loss = loss;
  r.compile = compile;
  return r;
}

std::uint64_t sum_of(const std::map<std::string, std::uint64_t>& saved) {
  std::uint64_t sum = 0;
  for (const auto& [name, bytes] : saved) sum += bytes;
  return sum;
}

}  // namespace

TEST_CASE("a compiled Llama layer saves what the min-cut partitioner keeps", "[unit][hf][compile]") {
  // The partitioner's rules, applied by hand to LlamaDecoderLayer in a bf16 model (per token, bytes):
  //   RMSNorm 1: rsqrt is a reduction 3,072x smaller than its input: never recomputed (ban_if_reduction), saved, 4.
  //     Its output, which q's, k's and v's weight gradients read in GEMMs (no kernel fuses into a GEMM), must
  //     exist in the backward: never recomputed (ban_if_materialized_backward), saved, 2h = 6,144. Its fp32
  //     upcast is pointwise from the layer input, a graph input of 2h = 6,144, which the norm's backward reads
  //     with rsqrt: saved.
  //   q, k, v: GEMMs (compute-intensive, never recomputed). SDPA's backward reads its inputs: q and k rotated,
  //     2 x 3,072 and 2 x 1,024, and v, 2 x 1,024; its output, 2 x 3,072 (also o_proj's input) and the fp32
  //     log-sum-exp, 4 x 24 = 96. (Rotated q and k are read by SDPA's backward, not fusible: saved.)
  //   The residual add and RMSNorm 2: the sum, 2h = 6,144 (to recompute it the backward would need o_proj's output,
  //     as large), its rsqrt, 4, and its output, read by gate's and up's weight gradients: 6,144.
  //   SwiGLU: gate's and up's GEMM outputs, 2 x 8,192 each, which silu(gate) * up's backward reads; silu is
  //     pointwise from gate and read only by fusible ops: recomputed; the product, read by down_proj's weight
  //     gradient (a GEMM): saved, 2 x 8,192.
  // Per token: 6,144 + 4 + 6,144 + 6,144 + 2,048 + 2,048 + 6,144 + 96 + 6,144 + 4 + 6,144 + 3 x 16,384 = 90,216
  // bytes; 8,192 tokens: 739,049,472 bytes a layer (eager: 131,176 a token).
  const std::map<std::string, std::uint64_t> expected = {
      {"layer{}.ln1.in", 2 * T * h},          {"layer{}.ln1.rsqrt", 4 * T},
      {"layer{}.attn.qkv_in", 2 * T * h},
      {"layer{}.attn.q_rope", 2 * T * q_width}, {"layer{}.attn.k_rope", 2 * T * kv_width},
      {"layer{}.attn.v", 2 * T * kv_width},   {"layer{}.attn.lse", 4 * heads * T},
      {"layer{}.attn.out_in", 2 * T * q_width}, {"layer{}.ln2.in", 2 * T * h},
      {"layer{}.ln2.rsqrt", 4 * T},           {"layer{}.mlp.fc_in", 2 * T * h},
      {"layer{}.mlp.gate", 2 * T * f},        {"layer{}.mlp.up", 2 * T * f},
      {"layer{}.mlp.down_in", 2 * T * f},
  };
  const std::map<std::string, std::uint64_t> saved = test::saved_per_layer(test::inventory_of(llama_3b(), bf16_run(compile_scope::model)));
  CHECK(saved == expected);
  CHECK(sum_of(saved) == 739'049'472);
  CHECK(sum_of(saved) == T * 90'216);
}

TEST_CASE("under autocast a compiled Llama layer saves its fp32 residual stream and the weights' casts", "[unit][hf][compile]") {
  // fp32 weights under autocast (HF Trainer's bf16=True): the same cut, but the layer's input and the residual sum
  // are the fp32 residual stream (4h each). The bf16 casts of the weights are pointwise from the fp32 parameters,
  // but the input gradients' GEMMs read them in the backward: never recomputed (ban_if_materialized_backward),
  // saved, as eager autocast's cache keeps them; each norm's output is cast once (the graph merges q's, k's and v's
  // casts), saved in bf16. Per token: 90,216 + 2 x 6,144 = 102,504 bytes; per layer the seven weights in bf16.
  run_config r = bf16_run(compile_scope::model);
  r.precision = precision_regime::amp_bf16;
  const inventory inv = test::inventory_of(llama_3b(), r);
  std::map<std::string, std::uint64_t> saved = test::saved_per_layer(inv);
  std::uint64_t casts = 0;
  for (const tensor_spec& t : inv.tensors)
    if (t.per_layer && t.name.rfind("layer{}.autocast.weights.", 0) == 0) casts += t.bytes, saved.erase(std::string(t.name));
  CHECK(sum_of(saved) == T * 102'504);
  CHECK(saved.at("layer{}.ln1.in") == 4 * T * h);
  CHECK(saved.at("layer{}.ln2.in") == 4 * T * h);
  // q and o: h x q_width; k and v: h x kv_width; gate, up and down: h x f; two bytes each.
  CHECK(casts == 2 * (2 * h * q_width + 2 * h * kv_width + 3 * h * f));
}

TEST_CASE("without --compile the eager Llama layer saves what autograd does", "[unit][hf][compile]") {
  // Autograd's saves in a bf16 LlamaDecoderLayer (derivatives.yaml; LlamaRMSNorm upcasts to fp32), per token:
  // RMSNorm 1: the fp32 upcast 4h, rsqrt 4, the bf16 normalised tensor (the weight's gradient) 2h; q, k, v's
  // shared input 2h; q and k rotated 2 x 3,072 + 2 x 1,024, v 2 x 1,024, the log-sum-exp 96, SDPA's output 2h;
  // RMSNorm 2: 4h + 4 + 2h; gate's and up's shared input 2h; gate, silu, up and the product 4 x 2f.
  // 20h + 4,096 + 96 + 8 + 8f = 131,176 bytes a token.
  const std::map<std::string, std::uint64_t> saved = test::saved_per_layer(test::inventory_of(llama_3b(), bf16_run(compile_scope::none)));
  CHECK(sum_of(saved) == T * (20 * h + 4096 + 96 + 8 + 8 * f));
  CHECK(sum_of(saved) == 1'074'593'792);
  CHECK(saved.at("layer{}.ln1.in") == 4 * T * h);
  CHECK(saved.at("layer{}.mlp.silu") == 2 * T * f);
  CHECK(saved.at("layer{}.mlp.down_in") == 2 * T * f);
}

TEST_CASE("the compiled loss keeps the bf16 logits and their logsumexp, no fp32 copy", "[unit][hf][compile]") {
  const model_spec m = llama_3b();
  const inventory inv = test::inventory_of(m, bf16_run(compile_scope::model));
  CHECK(test::tensor_named(inv, "loss.log_probs") == nullptr);
  CHECK(test::tensor_named(inv, "loss.logits_fp32") == nullptr);
  CHECK(test::tensor_named(inv, "loss.logsumexp")->bytes == 4 * T);
  // The backward's one kernel writes the logits' gradient in their dtype.
  CHECK(test::tensor_named(inv, "loss.grad_logits")->bytes == 2 * T * m.vocab);
  // Chunked (torchtune's compute_cross_entropy compiled per chunk): no fp32 log-probabilities either.
  const inventory chunked = test::inventory_of(m, bf16_run(compile_scope::model, loss_kind::chunked));
  CHECK(test::tensor_named(chunked, "loss.log_probs") == nullptr);
  CHECK(test::tensor_named(chunked, "loss.grad_logits")->bytes == 2 * (T / 8) * m.vocab);
}

TEST_CASE("every compile scope compiles the same layer", "[unit][hf][compile]") {
  // Regional compilation (--compile layers, layers+loss) compiles each LlamaDecoderLayer as its own graph: the
  // partitioner cuts the same joint graph as inside the whole model, so each layer saves the same tensors.
  const std::map<std::string, std::uint64_t> whole = test::saved_per_layer(test::inventory_of(llama_3b(), bf16_run(compile_scope::model)));
  for (const compile_scope scope : {compile_scope::layers, compile_scope::layers_and_loss}) {
    INFO(compile_scope_name(scope));
    CHECK(test::saved_per_layer(test::inventory_of(llama_3b(), bf16_run(scope))) == whole);
  }
}

TEST_CASE("compile of the layers alone runs the head and the loss eagerly", "[unit][hf][compile]") {
  // accelerate's regional compilation compiles the blocks of every nn.ModuleList, nothing else: the loss is
  // transformers' ForCausalLMLoss as without compile (an fp32 copy, the fp32 log-probabilities saved, the 16-bit
  // logits held by the outputs until after backward).
  const model_spec m = llama_3b();
  const inventory inv = test::inventory_of(m, bf16_run(compile_scope::layers));
  CHECK(test::tensor_named(inv, "loss.log_probs")->bytes == 4 * T * m.vocab);
  CHECK(test::tensor_named(inv, "loss.logits_fp32")->bytes == 4 * T * m.vocab);
  CHECK(test::tensor_named(inv, "loss.logsumexp") == nullptr);
  CHECK(test::tensor_named(inv, "logits")->intervals[0].last_base == event_index(event_kind::bwd_embed, 0, m.layers));
}

TEST_CASE("compile of the layers and the loss apart under transformers' modules compiles their loss as the whole model does", "[unit][hf][compile]") {
  // transformers' LlamaForCausalLM returns the head's bf16 logits (the loop holds them until after backward) and
  // ForCausalLMLoss upcasts them inside the loss: compiled apart, the loss's graph saves those logits (its input)
  // and the logsumexp, as inside the whole compiled model; no fp32 logits exist. (A model that upcasts its own
  // logits, torchtune's: tests/planner/profiles/torchtune/.)
  const model_spec m = llama_3b();
  const inventory inv = test::inventory_of(m, bf16_run(compile_scope::layers_and_loss));
  CHECK(test::tensor_named(inv, "logits.fp32") == nullptr);
  CHECK(test::tensor_named(inv, "loss.logits_fp32") == nullptr);
  CHECK(test::tensor_named(inv, "loss.grad_logits")->bytes == 2 * T * m.vocab);
  CHECK(test::plan_of(m, bf16_run(compile_scope::layers_and_loss)).tensor_peak_bytes ==
        test::plan_of(m, bf16_run(compile_scope::model)).tensor_peak_bytes);
}

TEST_CASE("the compiled forward makes no pointwise intermediates", "[unit][hf][compile]") {
  const inventory inv = test::inventory_of(llama_3b(), bf16_run(compile_scope::model));
  for (const char* name : {"layer{}.fwd.ln1_pow", "layer{}.fwd.ln1_x_rsqrt", "layer{}.fwd.q_cos", "layer{}.fwd.q_cat",
                           "layer{}.fwd.k_sin", "layer{}.fwd.attn_residual", "layer{}.fwd.ln2_x_rsqrt", "layer{}.mlp.silu"}) {
    INFO(name);
    CHECK(test::tensor_named(inv, name) == nullptr);
  }
  // What the fused kernels write and the GEMMs read is saved for the weights' gradients: the norms' outputs and
  // SwiGLU's product.
  CHECK(!test::tensor_named(inv, "layer{}.attn.qkv_in")->momentary);
  CHECK(!test::tensor_named(inv, "layer{}.mlp.fc_in")->momentary);
  CHECK(test::tensor_named(inv, "layer{}.mlp.down_in")->bytes == 2 * T * f);
}

TEST_CASE("compiled fused kernels move fewer bytes, the GEMMs and attention the same", "[unit][hf][compile]") {
  const model_spec m = llama_3b();
  const plan_result eager = test::plan_of(m, bf16_run(compile_scope::none)), compiled = test::plan_of(m, bf16_run(compile_scope::model));
  CHECK(compiled.flops.hardware_per_step == eager.flops.hardware_per_step);
  CHECK(compiled.time.step_seconds < eager.time.step_seconds);
  // SwiGLU by hand: forward reads gate and up, writes the product (3 x 2 bytes an element); backward writes gate's
  // and up's gradients from the product's, gate and up (5 x 2): the product is saved, not recomputed.
  // Per step: every one of the 28 layers, one micro-batch.
  const double elements = static_cast<double>(T) * f;
  double product_bytes = 0;
  for (const auto& op : compiled.ops.ops) {
    CHECK(op.name != "mlp.silu");
    if (op.name == "mlp.product") product_bytes += op.bytes;
  }
  CHECK(product_bytes == Approx(28 * (3 + 5) * 2 * elements).epsilon(1e-12));
}

TEST_CASE("torch.compile is refused where its layers are not modelled", "[unit][hf][compile]") {
  auto refused = [](const model_spec& m, run_config r) {
    r.compile = compile_scope::model;
    CHECK_THROWS_AS(test::plan_of(m, r), input_error);
  };
  run_config fp32 = bf16_run(compile_scope::model);
  fp32.precision = precision_regime::fp32;
  refused(llama_3b(), fp32);
  run_config eager_attention = bf16_run(compile_scope::model);
  eager_attention.attention = attention_kind::eager;
  refused(llama_3b(), eager_attention);
  run_config lora = bf16_run(compile_scope::model);
  lora.finetune = finetune_kind::lora;
  refused(llama_3b(), lora);
  refused(test::data().model("gpt2").spec, bf16_run(compile_scope::model));
}
