#include <catch2/catch.hpp>

#include "planner/catalog.hpp"
#include "planner/input_error.hpp"
#include "planner/param_count.hpp"
#include "planner/shape_from_params.hpp"

using namespace trainplan;

namespace {
const catalog& data() {
  static const catalog c = catalog::load();
  return c;
}
std::uint64_t params_of(const char* name) { return count_params(data().model(name).spec).total; }
}  // namespace

TEST_CASE("exact parameter counts match the published models", "[params]") {
  CHECK(params_of("gpt2") == 124'439'808ull);          // Hugging Face gpt2, num_parameters()
  CHECK(params_of("llama-2-7b") == 6'738'415'616ull);  // Llama-2-7b-hf
  CHECK(params_of("llama-3.1-8b") == 8'030'261'248ull);
  CHECK(params_of("gpt2-medium") == 354'823'168ull);
  CHECK(params_of("gpt2-large") == 774'030'080ull);
  CHECK(params_of("gpt2-xl") == 1'557'611'200ull);
  CHECK(params_of("mistral-7b") == 7'241'732'096ull);
  CHECK(params_of("tinyllama-1.1b") == 1'100'048'384ull);
  CHECK(params_of("llama-2-13b") == 13'015'864'320ull);
  CHECK(params_of("llama-2-70b") == 68'976'648'192ull);
  CHECK(params_of("llama-3.1-70b") == 70'553'706'496ull);
  CHECK(params_of("llama-3.1-405b") == 405'853'388'800ull);
}

TEST_CASE("every preset is within 10% of its nominal size", "[params]") {
  for (const model_preset& p : data().models()) {
    INFO(p.spec.name);
    const double ratio = double(count_params(p.spec).total) / double(p.nominal_params);
    CHECK(ratio > 0.9);
    CHECK(ratio < 1.1);
  }
}

TEST_CASE("12Lh^2 + Vh is the exact count minus biases, norms and positions for GPT", "[params]") {
  // GPT-2: each layer has 12h^2 weights plus 13h of biases and LayerNorm parameters; the tied embedding
  // is Vh; positions add n_pos*h and the final LayerNorm 2h (Ultra-scale Playbook formula vs exact).
  const model_spec& m = data().model("gpt2").spec;
  const param_counts c = count_params(m);
  const std::uint64_t h = m.hidden, L = m.layers;
  CHECK(c.approx_12lh2_vh == 12 * L * h * h + m.vocab * h);
  CHECK(c.total - c.approx_12lh2_vh == L * 13 * h + m.max_positions * h + 2 * h);
}

TEST_CASE("llama counts follow GQA: k and v are kv_heads*head_dim wide", "[params]") {
  model_spec m = data().model("llama-3.1-8b").spec;
  const std::uint64_t h = 4096, kv = 8 * 128, f = 14336;
  CHECK(count_params(m).per_layer == h * h + 2 * h * kv + h * h + 3 * h * f + 2 * h);
  m.qkv_bias = true;  // Qwen2-style
  CHECK(count_params(m).per_layer == h * h + 2 * h * kv + h * h + 3 * h * f + 2 * h + h + 2 * kv);
  m.tied_embeddings = true;
  CHECK(count_params(m).lm_head == 0);
}

TEST_CASE("the --params rule picks the first preset of that nominal size", "[params]") {
  CHECK(shape_for_params(7'000'000'000ull, data()).spec.name == "llama-2-7b");
  CHECK(shape_for_params(124'000'000ull, data()).spec.name == "gpt2");
  CHECK(shape_for_params(405'000'000'000ull, data()).spec.name == "llama-3.1-405b");
}

TEST_CASE("the --params rule without a preset derives a llama shape within 3%", "[params]") {
  for (std::uint64_t target : {3'000'000'000ull, 20'000'000'000ull, 500'000'000ull, 34'000'000'000ull}) {
    INFO(target);
    shape_choice c = shape_for_params(target, data());
    CHECK(c.spec.name == "derived");
    CHECK(c.spec.family == model_family::llama);
    const double err = std::abs(double(count_params(c.spec).total) - double(target)) / double(target);
    CHECK(err <= 0.03);
    CHECK(c.spec.hidden % 128 == 0);
    CHECK(c.spec.hidden == c.spec.heads * c.spec.head_dim);
    CHECK_NOTHROW(validate_model(c.spec));
    CHECK_THAT(c.rule, Catch::Contains("derived"));
  }
}

TEST_CASE("impossible shapes are rejected", "[params]") {
  model_spec m = data().model("llama-2-7b").spec;
  model_spec bad = m;
  bad.kv_heads = 5;  // does not divide 32
  CHECK_THROWS_AS(validate_model(bad), input_error);
  bad = m;
  bad.layers = 0;
  CHECK_THROWS_AS(validate_model(bad), input_error);
  bad = data().model("gpt2").spec;
  bad.kv_heads = 4;  // gpt has no GQA
  CHECK_THROWS_AS(validate_model(bad), input_error);
  bad = m;
  bad.hidden = 1ull << 40;
  CHECK_THROWS_AS(validate_model(bad), input_error);
}
