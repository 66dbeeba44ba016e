#include <catch2/catch.hpp>

#include "planner/io/catalog.hpp"
#include "planner/io/hf_config.hpp"
#include "planner/util/input_error.hpp"
#include "planner/model/param_count.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using trainplan::test::hf_fixture;

namespace {
// The model read from a config, named and sourced as the preset, so that == compares every shape field.
model_spec as_preset(model_spec m, const model_spec& preset) {
  m.name = preset.name;
  m.source = preset.source;
  return m;
}
const model_spec& preset(const char* name) {
  static const catalog c = catalog::load();
  return c.model(name).spec;
}

// A real config's text with one key replaced ("key": value), for the error cases below.
std::string gemma2_with(const std::string& key_and_value) {
  const std::string base = R"({"model_type": "gemma2", "num_hidden_layers": 42, "hidden_size": 3584,
    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256, "intermediate_size": 14336,
    "vocab_size": 256000)";
  return base + (key_and_value.empty() ? "" : ", " + key_and_value) + "}";
}
}  // namespace

TEST_CASE("Hugging Face configs give the same exact counts as the presets", "[hf-config]") {
  const model_spec gpt2 = model_from_hf_config(hf_fixture("gpt2.json"));
  CHECK(gpt2.family == model_family::gpt);
  CHECK(gpt2.ffn == 3072);  // n_inner absent: 4 * n_embd
  CHECK(gpt2.tied_embeddings);
  CHECK(gpt2.dropout == Approx(0.1));
  CHECK(count_params(gpt2).total == 124'439'808ull);

  const model_spec llama = model_from_hf_config(hf_fixture("llama-3.1-8b.json"));
  CHECK(llama.family == model_family::llama);
  CHECK(llama.kv_heads == 8);
  CHECK(count_params(llama).total == 8'030'261'248ull);

  CHECK(count_params(model_from_hf_config(hf_fixture("mistral-7b.json"))).total == 7'241'732'096ull);
}

TEST_CASE("Qwen2 configs carry q/k/v biases and tied embeddings", "[hf-config]") {
  const model_spec q = model_from_hf_config(hf_fixture("qwen2-0.5b.json"));
  CHECK(q.qkv_bias);
  CHECK(q.tied_embeddings);
  CHECK(q.head_dim == 64);
  CHECK(count_params(q).total == 494'032'768ull);  // Qwen2-0.5B: 0.49B parameters with tied embeddings
}

TEST_CASE("Qwen2's use_sliding_window slides the layers from max_window_layers on (Qwen2Config's layer_types)",
          "[hf-config][window]") {
  const std::string base = R"({"model_type": "qwen2", "num_hidden_layers": 24, "hidden_size": 896, "num_attention_heads": 14,
      "num_key_value_heads": 2, "intermediate_size": 4864, "vocab_size": 151936, "sliding_window": 4096)";
  // Off by default (Qwen2.5's released configs), and a window from layer 28 on is no window in 24 layers.
  CHECK(model_from_hf_config_text(base + "}", "q.json").sliding_window_tokens == 0);
  CHECK(model_from_hf_config_text(base + R"(, "use_sliding_window": true})", "q.json").sliding_window_tokens == 0);
  CHECK(model_from_hf_config_text(base + R"(, "use_sliding_window": true, "max_window_layers": 24})", "q.json")
            .sliding_window_tokens == 0);
  // max_window_layers 0: every layer slides.
  CHECK(model_from_hf_config_text(base + R"(, "use_sliding_window": true, "max_window_layers": 0})", "q.json")
            .sliding_window_tokens == 4096);
  CHECK_THROWS_WITH(model_from_hf_config_text(base + R"(, "use_sliding_window": true, "max_window_layers": 12})", "q.json"),
                    Catch::Contains("q.json") && Catch::Contains("layers 12 to 23"));
}

TEST_CASE("bad Hugging Face configs are input errors naming the file", "[hf-config]") {
  CHECK_THROWS_WITH(model_from_hf_config(hf_fixture("broken.json")), Catch::Contains("broken.json") && Catch::Contains("JSON"));
  CHECK_THROWS_WITH(model_from_hf_config(hf_fixture("unsupported.json")), Catch::Contains("mamba"));
  CHECK_THROWS_WITH(model_from_hf_config(hf_fixture("missing_ffn.json")), Catch::Contains("intermediate_size"));
  CHECK_THROWS_AS(model_from_hf_config(hf_fixture("no-such-file.json")), input_error);
  CHECK_THROWS_AS(model_from_hf_config_text("[1, 2]", "array.json"), input_error);
  CHECK_THROWS_AS(model_from_hf_config_text(R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 10, "n_head": 3,
      "vocab_size": 10, "n_positions": 8})", "x.json"), input_error);  // 3 heads do not divide 10
}

TEST_CASE("gemma2 and phi3 configs read as the presets, field for field", "[hf-config]") {
  // The fixtures hold the real configs' values (google/gemma-2-9b, microsoft/Phi-3-mini-4k-instruct).
  const model_spec g = model_from_hf_config(hf_fixture("gemma-2-9b.json"));
  CHECK(as_preset(g, preset("gemma-2-9b")) == preset("gemma-2-9b"));
  CHECK(g.head_dim == 256);  // its own key: hidden / heads would be 224
  CHECK(g.sliding_layers() == 21);
  CHECK(count_params(g).total == 9'241'705'984ull);

  const model_spec phi = model_from_hf_config(hf_fixture("phi-3-mini-4k.json"));
  CHECK(as_preset(phi, preset("phi-3-mini")) == preset("phi-3-mini"));
  CHECK(phi.head_dim == 96);
  CHECK(count_params(phi).total == 3'821'079'552ull);

  CHECK(as_preset(model_from_hf_config(hf_fixture("qwen2.5-7b.json")), preset("qwen2.5-7b")) == preset("qwen2.5-7b"));
  CHECK(as_preset(model_from_hf_config(hf_fixture("llama-3.2-1b.json")), preset("llama-3.2-1b")) == preset("llama-3.2-1b"));
  CHECK(as_preset(model_from_hf_config(hf_fixture("mistral-7b.json")), preset("mistral-7b")) == preset("mistral-7b"));
}

TEST_CASE("gemma2 keys left out take Gemma2Config's defaults, and null turns a feature off", "[hf-config]") {
  const model_spec d = model_from_hf_config_text(gemma2_with(""), "g.json");
  CHECK(d.tied_embeddings);
  CHECK(d.attn_logit_softcap == 50.0);
  CHECK(d.final_logit_softcap == 30.0);
  CHECK(d.sliding_window_tokens == 4096);
  CHECK(d.sliding_window_global_every == 2);
  const model_spec off = model_from_hf_config_text(
      gemma2_with(R"("attn_logit_softcapping": null, "final_logit_softcapping": null, "sliding_window": null)"), "g.json");
  CHECK(off.attn_logit_softcap == 0.0);
  CHECK(off.final_logit_softcap == 0.0);
  CHECK(off.sliding_layers() == 0);
  CHECK(off.sliding_window_global_every == 0);
  // layer_types, as newer transformers write it, must be Gemma 2's alternation.
  std::string alternating = R"("layer_types": [)";
  for (int i = 0; i < 42; ++i) alternating += std::string(i ? ", " : "") + (i % 2 ? R"("full_attention")" : R"("sliding_attention")");
  CHECK_NOTHROW(model_from_hf_config_text(gemma2_with(alternating + "]"), "g.json"));
}

TEST_CASE("bad gemma2 and phi3 configs are one-line input errors naming file and key", "[hf-config]") {
  auto message = [](const std::string& text) {
    try {
      model_from_hf_config_text(text, "cfg.json");
    } catch (const input_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto one_line_about = [&](const std::string& text, const char* key) {
    const std::string m = message(text);
    INFO(m);
    CHECK(m.find("cfg.json") != std::string::npos);
    CHECK(m.find(key) != std::string::npos);
    CHECK(m.find('\n') == std::string::npos);
  };
  one_line_about(R"({"model_type": "gemma2", "num_hidden_layers": 42, "hidden_size": 3584, "num_attention_heads": 16,
      "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 256000})", "head_dim");
  one_line_about(gemma2_with(R"("attn_logit_softcapping": "fifty")"), "attn_logit_softcapping");
  one_line_about(gemma2_with(R"("final_logit_softcapping": -30)"), "final_logit_softcapping");
  one_line_about(gemma2_with(R"("hidden_activation": "relu")"), "hidden_activation");
  one_line_about(gemma2_with(R"("attention_bias": true)"), "attention_bias");
  one_line_about(gemma2_with(R"("sliding_window": 0)"), "sliding_window");
  one_line_about(gemma2_with(R"("layer_types": ["full_attention"])"), "layer_types");
  one_line_about(R"({"model_type": "phi3", "num_hidden_layers": 32, "hidden_size": 3072, "num_attention_heads": 32,
      "vocab_size": 32064})", "intermediate_size");
  one_line_about(R"({"model_type": "phi3", "num_hidden_layers": 32, "hidden_size": 3072, "num_attention_heads": 32,
      "intermediate_size": 8192, "vocab_size": 32064, "hidden_act": "gelu"})", "hidden_act");
  one_line_about(R"({"model_type": "qwen2", "num_hidden_layers": 32, "hidden_size": 896, "num_attention_heads": 14,
      "intermediate_size": 4864, "vocab_size": 151936, "use_sliding_window": true, "sliding_window": 4096})",
                 "max_window_layers");
  // The unsupported-type message lists every type the reader knows.
  const std::string unsupported = message(R"({"model_type": "mamba"})");
  for (const char* type : {"gpt2", "llama", "mistral", "qwen2", "phi3", "gemma2"}) CHECK_THAT(unsupported, Catch::Contains(type));
}

TEST_CASE("unmodelled activations, dropout probabilities out of range and bad positions are refused by key", "[hf-config]") {
  const std::string gpt2 = R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 100, "n_positions": 64)";
  const std::string llama = R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
      "intermediate_size": 256, "vocab_size": 100)";
  auto refused = [](const std::string& text, const char* key) {
    CHECK_THROWS_WITH(model_from_hf_config_text(text, "cfg.json"), Catch::Contains("cfg.json") && Catch::Contains(key));
  };
  CHECK_NOTHROW(model_from_hf_config_text(gpt2 + R"(, "activation_function": "gelu_new"})", "cfg.json"));
  refused(gpt2 + R"(, "activation_function": "relu"})", "activation_function");
  refused(gpt2 + R"(, "activation_function": 123})", "activation_function");
  refused(llama + R"(, "hidden_act": "gelu"})", "hidden_act");
  refused(gpt2 + R"(, "attn_pdrop": -3})", "attn_pdrop");
  refused(gpt2 + R"(, "embd_pdrop": "abc"})", "embd_pdrop");
  refused(gpt2 + R"(, "resid_pdrop": 1099511627776})", "resid_pdrop");
  refused(gpt2 + R"(, "resid_pdrop": 0, "attn_pdrop": 0.1, "embd_pdrop": 0})", "attn_pdrop");  // dropout on one site only
  CHECK(model_from_hf_config_text(gpt2 + R"(, "resid_pdrop": 0.2, "attn_pdrop": 0.1})", "cfg.json").dropout == 0.2);
  refused(llama + R"(, "attention_dropout": 1})", "attention_dropout");
  refused(llama + R"(, "max_position_embeddings": {}})", "max_position_embeddings");
  refused(llama + R"(, "max_position_embeddings": -1})", "max_position_embeddings");
  refused(gpt2 + R"(, "max_position_embeddings": "x"})", "max_position_embeddings");
  refused(gpt2 + R"(, "max_position_embeddings": 128})", "max_position_embeddings");  // n_positions says 64
  CHECK_NOTHROW(model_from_hf_config_text(llama + R"(, "max_position_embeddings": 4096, "hidden_act": "silu"})", "cfg.json"));
  // A learned position table of 2^40 rows is no model (it planned 844 trillion parameters): the same limit as
  // every other size.
  refused(R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 100, "n_positions": 1099511627776})",
          "max_positions");
}
