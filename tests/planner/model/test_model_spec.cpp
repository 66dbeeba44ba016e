#include <catch2/catch.hpp>
#include <limits>

#include "planner/io/catalog.hpp"
#include "planner/util/input_error.hpp"
#include "planner/model/model_spec.hpp"

using namespace trainplan;

namespace {
const catalog& data() {
  static const catalog c = catalog::load();
  return c;
}
}  // namespace

TEST_CASE("plain presets keep every Gemma 2 field at its neutral default", "[model]") {
  const model_spec& m = data().model("llama-3.1-8b").spec;
  CHECK(m.norms_per_layer == 2);
  CHECK(m.mlp_gate == gate_activation::silu);
  CHECK_FALSE(m.embed_scale_sqrt_hidden);
  CHECK(m.attn_logit_softcap == 0.0);
  CHECK(m.final_logit_softcap == 0.0);
  CHECK(m.sliding_layers() == 0);
  CHECK_FALSE(m.layer_slides(0));
}

TEST_CASE("gemma-2-9b slides on even layers and attends globally on odd ones", "[model]") {
  // HF Gemma2DecoderLayer: layer i slides when i is even (layer_types "sliding_attention" for (i + 1) % 2).
  const model_spec& g = data().model("gemma-2-9b").spec;
  CHECK(g.head_dim == 256);
  CHECK(g.q_width() == 4096);  // 16 x 256, wider than h = 3584
  CHECK(g.norms_per_layer == 4);
  CHECK(g.mlp_gate == gate_activation::gelu_tanh);
  CHECK(g.embed_scale_sqrt_hidden);
  CHECK(g.attn_logit_softcap == 50.0);
  CHECK(g.final_logit_softcap == 30.0);
  CHECK(g.sliding_window_tokens == 4096);
  CHECK(g.layer_slides(0));
  CHECK_FALSE(g.layer_slides(1));
  CHECK(g.layer_slides(40));
  CHECK_FALSE(g.layer_slides(41));
  CHECK(g.sliding_layers() == 21);
  // A window on every layer (Mistral-7B-v0.1's 4096, Phi-3-mini-4k's 2047).
  CHECK(data().model("mistral-7b").spec.sliding_layers() == 32);
  CHECK(data().model("phi-3-mini").spec.sliding_window_tokens == 2047);
  CHECK(data().model("phi-3-mini").spec.sliding_layers() == 32);
}

TEST_CASE("Gemma 2 fields that no model can have are rejected", "[model]") {
  const model_spec g = data().model("gemma-2-9b").spec;
  CHECK_NOTHROW(validate_model(g));
  model_spec bad = g;
  bad.norms_per_layer = 3;
  CHECK_THROWS_WITH(validate_model(bad), Catch::Contains("norms_per_layer"));
  bad = g;
  bad.attn_logit_softcap = -1.0;
  CHECK_THROWS_WITH(validate_model(bad), Catch::Contains("attn_logit_softcap"));
  bad = g;
  bad.final_logit_softcap = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH(validate_model(bad), Catch::Contains("final_logit_softcap"));
  bad = g;
  bad.sliding_window_tokens = 0;  // a global-every rule with no window
  CHECK_THROWS_WITH(validate_model(bad), Catch::Contains("sliding_window_global_every"));
  bad = g;
  bad.sliding_window_global_every = 43;  // more than the 42 layers
  CHECK_THROWS_WITH(validate_model(bad), Catch::Contains("sliding_window_global_every"));
  // Sandwich norms and GeGLU belong to the llama family's RMSNorm/gated-MLP block.
  model_spec gpt = data().model("gpt2").spec;
  gpt.norms_per_layer = 4;
  CHECK_THROWS_WITH(validate_model(gpt), Catch::Contains("gpt family"));
  gpt = data().model("gpt2").spec;
  gpt.mlp_gate = gate_activation::gelu_tanh;
  CHECK_THROWS_WITH(validate_model(gpt), Catch::Contains("gpt family"));
}

TEST_CASE("gate activations parse by name", "[model]") {
  CHECK(parse_gate_activation("silu") == gate_activation::silu);
  CHECK(parse_gate_activation("gelu_tanh") == gate_activation::gelu_tanh);
  CHECK(gate_activation_name(gate_activation::gelu_tanh) == "gelu_tanh");
  CHECK_THROWS_AS(parse_gate_activation("relu"), input_error);
}
