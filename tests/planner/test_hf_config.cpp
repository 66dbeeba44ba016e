#include <catch2/catch.hpp>

#include "planner/hf_config.hpp"
#include "planner/input_error.hpp"
#include "planner/param_count.hpp"

using namespace trainplan;

namespace {
std::filesystem::path fixture(const char* name) { return std::filesystem::path(TRAINPLAN_TEST_DATA) / "hf" / name; }
}  // namespace

TEST_CASE("Hugging Face configs give the same exact counts as the presets", "[hf-config]") {
  const model_spec gpt2 = model_from_hf_config(fixture("gpt2.json"));
  CHECK(gpt2.family == model_family::gpt);
  CHECK(gpt2.ffn == 3072);  // n_inner absent: 4 * n_embd
  CHECK(gpt2.tied_embeddings);
  CHECK(gpt2.dropout == Approx(0.1));
  CHECK(count_params(gpt2).total == 124'439'808ull);

  const model_spec llama = model_from_hf_config(fixture("llama-3.1-8b.json"));
  CHECK(llama.family == model_family::llama);
  CHECK(llama.kv_heads == 8);
  CHECK(count_params(llama).total == 8'030'261'248ull);

  CHECK(count_params(model_from_hf_config(fixture("mistral-7b.json"))).total == 7'241'732'096ull);
}

TEST_CASE("Qwen2 configs carry q/k/v biases and tied embeddings", "[hf-config]") {
  const model_spec q = model_from_hf_config(fixture("qwen2-0.5b.json"));
  CHECK(q.qkv_bias);
  CHECK(q.tied_embeddings);
  CHECK(q.head_dim == 64);
  CHECK(count_params(q).total == 494'032'768ull);  // Qwen2-0.5B: 0.49B parameters with tied embeddings
}

TEST_CASE("bad Hugging Face configs are input errors naming the file", "[hf-config]") {
  CHECK_THROWS_WITH(model_from_hf_config(fixture("broken.json")), Catch::Contains("broken.json") && Catch::Contains("JSON"));
  CHECK_THROWS_WITH(model_from_hf_config(fixture("unsupported.json")), Catch::Contains("mamba"));
  CHECK_THROWS_WITH(model_from_hf_config(fixture("missing_ffn.json")), Catch::Contains("intermediate_size"));
  CHECK_THROWS_AS(model_from_hf_config(fixture("no-such-file.json")), input_error);
  CHECK_THROWS_AS(model_from_hf_config_text("[1, 2]", "array.json"), input_error);
  CHECK_THROWS_AS(model_from_hf_config_text(R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 10, "n_head": 3,
      "vocab_size": 10, "n_positions": 8})", "x.json"), input_error);  // 3 heads do not divide 10
}
