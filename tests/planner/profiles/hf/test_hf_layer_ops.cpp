// The hf profile's op lists (planner/profiles/hf/hf_layer_ops.hpp) against the modeling code's forward order,
// written out by hand from transformers 5.17: GPT2Block.forward, GPT2Attention.forward and GPT2MLP.forward;
// LlamaDecoderLayer.forward and LlamaMLP.forward (down_proj(act_fn(gate_proj(x)) * up_proj(x)): Python
// evaluates the left operand, silu of gate, before up_proj), Gemma2DecoderLayer's sandwich norms.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "planner/profiles/hf/hf_layer_ops.hpp"
#include "planner/profiles/registry.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;

namespace {

std::vector<std::string> names(model_family family) {
  std::vector<std::string> out;
  for (const hf_layer_op& op : hf_layer_ops(family)) out.emplace_back(op.name);
  return out;
}

}  // namespace

TEST_CASE("hf op lists: GPT-2's block in GPT2Block.forward's order", "[unit][hf][ops]") {
  // ln_1, attn (c_attn, the attention, c_proj, resid_dropout), + residual, ln_2, mlp (c_fc, gelu_new, c_proj,
  // dropout), + residual; then the working sets no one op makes.
  const std::vector<std::string> expected = {
      "norm.ln_1", "attention.c_attn", "attention", "attention.c_proj", "dropout.resid", "residual.attention",
      "norm.ln_2", "mlp.c_fc", "mlp.gelu_new", "mlp.c_proj", "dropout.resid", "residual.mlp", "working sets"};
  CHECK(names(model_family::gpt) == expected);
}

TEST_CASE("hf op lists: a Llama layer in LlamaDecoderLayer.forward's order", "[unit][hf][ops]") {
  const std::vector<std::string> got = names(model_family::llama);
  auto at = [&](const std::string& name) {
    for (std::size_t i = 0; i < got.size(); ++i)
      if (got[i] == name) return static_cast<int>(i);
    FAIL("no op " << name);
    return -1;
  };
  // input_layernorm, self_attn (q, k, v; rotary; the attention; o_proj), Gemma 2's post-attention norm, the
  // residual add, post_attention_layernorm, mlp (gate_proj, silu, up_proj, the product, down_proj), Gemma 2's
  // post-feedforward norm, the residual add.
  const std::vector<std::string> order = {
      "norm.input_layernorm", "attention.qkv", "attention.rotary", "attention", "attention.o_proj",
      "norm.post_attention", "residual.attention", "norm.post_attention_layernorm", "mlp.gate_proj", "mlp.silu",
      "mlp.up_proj", "mlp.product", "mlp.down_proj", "norm.post_feedforward", "residual.mlp"};
  for (std::size_t i = 1; i < order.size(); ++i) {
    INFO(order[i - 1] << " before " << order[i]);
    CHECK(at(order[i - 1]) < at(order[i]));
  }
  // The MLP's ops are the dense layers'; the experts' block the MoE layers'.
  for (const hf_layer_op& op : hf_layer_ops(model_family::llama)) {
    const std::string name(op.name);
    if (name.starts_with("mlp.gate") || name == "mlp.silu" || name == "mlp.up_proj" || name == "mlp.product" ||
        name == "mlp.down_proj")
      CHECK(op.part == layer_part::dense_mlp);
    if (name == "moe") CHECK(op.part == layer_part::moe_mlp);
  }
}

TEST_CASE("hf op lists: SwiGLU's two ops are silu's and the product's kernels", "[unit][hf][ops]") {
  // TinyLlama-1.1B, one sequence of 1024 in bf16: F = 1024 x 5632 elements of 2 bytes. silu reads and writes F
  // (1 kernel), silu_backward reads two and writes one (1 kernel); the product reads two and writes one (1
  // kernel), its backward is two products (2 kernels, 6F). Per layer, forward and backward, 22 layers.
  const model_spec m = test::data().model("tinyllama-1.1b").spec;
  run_config run = test::run_of(1024, 1, recompute_mode::none, attention_kind::flash, 0.0);
  run.profile = &profile_named("hf");
  run.precision = precision_regime::bf16;
  const precision_layout layout = make_precision_layout(run.precision, run.grad_dtype);
  const step_ops ops = list_step_ops(m, run, layout, {1e15, 3.35e12, 1e14});
  const double F = 1024.0 * 5632, layers = 22;
  double silu_bytes = 0, product_bytes = 0, silu_kernels = 0, product_kernels = 0;
  for (const step_op& o : ops.ops) {
    if (o.name == "mlp.silu") silu_bytes += o.bytes, silu_kernels += o.kernels;
    if (o.name == "mlp.product") product_bytes += o.bytes, product_kernels += o.kernels;
  }
  CHECK(silu_bytes == Approx((2 + 3) * F * 2 * layers));
  CHECK(silu_kernels == Approx(2 * layers));
  CHECK(product_bytes == Approx((3 + 6) * F * 2 * layers));
  CHECK(product_kernels == Approx(3 * layers));
}
