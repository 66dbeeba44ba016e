#include <catch2/catch.hpp>

#include <algorithm>

#include "planner/io/catalog.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/util/input_error.hpp"
#include "planner/model/param_count.hpp"
#include "planner/io/shape_from_params.hpp"

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

// Issue 13's dense presets. Each count is derived by hand from the model's config.json (Llama-family
// layer: q h*(a*d) + k,v 2*h*(kv*d) + o (a*d)*h + gate/up/down 3*h*f + RMSNorms n*h [+ q/k/v biases];
// model: V*h embedding + L layers + final norm h [+ V*h untied head]), and the derivation is checked at
// compile time against the published figure: a safetensors total_size of bf16 weights is 2 bytes a parameter.
TEST_CASE("Qwen2.5 presets have their exact published counts", "[params]") {
  // Qwen2.5-0.5B: L 24, h 896, 14 heads, 2 kv heads, d 64, f 4864, V 151936, tied, q/k/v biases.
  constexpr std::uint64_t q05_layer = 896ull * 896 + 2ull * 896 * 128 + 896ull * 896 + 3ull * 896 * 4864 + 2 * 896 +
                                      (896 + 2 * 128);  // 14,912,384
  constexpr std::uint64_t q05 = 151936ull * 896 + 24 * q05_layer + 896;
  static_assert(q05 == 988'065'536ull / 2);  // Qwen/Qwen2.5-0.5B model.safetensors: 988,065,536 B; card "0.49B"
  CHECK(params_of("qwen2.5-0.5b") == q05);   // 494,032,768

  // Qwen2.5-7B: L 28, h 3584, 28 heads, 4 kv heads, d 128, f 18944, V 152064, untied, q/k/v biases.
  constexpr std::uint64_t q7_layer = 3584ull * 3584 + 2ull * 3584 * 512 + 3584ull * 3584 + 3ull * 3584 * 18944 +
                                     2 * 3584 + (3584 + 2 * 512);  // 233,057,792
  constexpr std::uint64_t q7 = 2 * 152064ull * 3584 + 28 * q7_layer + 3584;
  static_assert(q7 == 15'231'233'024ull / 2);  // Qwen/Qwen2.5-7B index.json total_size; card "7.61B"
  CHECK(params_of("qwen2.5-7b") == q7);        // 7,615,616,512

  // Qwen2.5-72B: L 80, h 8192, 64 heads, 8 kv heads, d 128, f 29568, V 152064, untied, q/k/v biases.
  constexpr std::uint64_t q72_layer = 8192ull * 8192 + 2ull * 8192 * 1024 + 8192ull * 8192 + 3ull * 8192 * 29568 +
                                      2 * 8192 + (8192 + 2 * 1024);  // 877,684,736
  constexpr std::uint64_t q72 = 2 * 152064ull * 8192 + 80 * q72_layer + 8192;
  static_assert(q72 == 145'412'407'296ull / 2);  // Qwen/Qwen2.5-72B index.json total_size; card "72.7B"
  CHECK(params_of("qwen2.5-72b") == q72);        // 72,706,203,648
}

TEST_CASE("Llama 3.2 presets have their exact published counts", "[params]") {
  // Llama-3.2-1B: L 16, h 2048, 32 heads, 8 kv heads, head_dim 64, f 8192, V 128256, tied.
  constexpr std::uint64_t l1_layer = 2048ull * 2048 + 2ull * 2048 * 512 + 2048ull * 2048 + 3ull * 2048 * 8192 + 2 * 2048;
  constexpr std::uint64_t l1 = 128256ull * 2048 + 16 * l1_layer + 2048;
  static_assert(l1 == 1'235'814'400ull);  // transformers num_parameters() of meta-llama/Llama-3.2-1B; card "1B (1.23B)"
  CHECK(params_of("llama-3.2-1b") == l1);

  // Llama-3.2-3B: L 28, h 3072, 24 heads (x 128 = 3072), 8 kv heads, head_dim 128, f 8192, V 128256, tied.
  constexpr std::uint64_t l3_layer = 3072ull * 3072 + 2ull * 3072 * 1024 + 3072ull * 3072 + 3ull * 3072 * 8192 + 2 * 3072;
  constexpr std::uint64_t l3 = 128256ull * 3072 + 28 * l3_layer + 3072;
  static_assert(l3 == 6'425'499'648ull / 2);  // meta-llama/Llama-3.2-3B index.json total_size; card "3B (3.21B)"
  CHECK(params_of("llama-3.2-3b") == l3);     // 3,212,749,824
}

TEST_CASE("Gemma 2 and Phi-3 presets have their exact published counts", "[params]") {
  // gemma-2-9b: L 42, h 3584, 16 heads x head_dim 256 = 4096 (not h), 8 kv heads x 256 = 2048, f 14336,
  // V 256000, tied; 4 RMSNorms a layer (input, post-attention, pre- and post-feedforward).
  constexpr std::uint64_t g9_layer = 3584ull * 4096 + 2ull * 3584 * 2048 + 4096ull * 3584 + 3ull * 3584 * 14336 +
                                     4 * 3584;  // 198,195,200
  constexpr std::uint64_t g9 = 256000ull * 3584 + 42 * g9_layer + 3584;
  static_assert(g9 == 18'483'411'968ull / 2);  // google/gemma-2-9b index.json total_size; model page "9.24B"
  CHECK(params_of("gemma-2-9b") == g9);        // 9,241,705,984

  // Phi-3-mini-4k-instruct: L 32, h 3072, 32 heads = 32 kv heads, d 96, f 8192, V 32064, untied. The fused
  // qkv_proj (3h, h) and gate_up_proj (2f, h) hold exactly the separate projections' weights.
  constexpr std::uint64_t phi_layer = 3ull * 3072 * 3072 + 3072ull * 3072 + 3ull * 3072 * 8192 + 2 * 3072;  // 113,252,352
  constexpr std::uint64_t phi = 2 * 32064ull * 3072 + 32 * phi_layer + 3072;
  static_assert(phi == 7'642'159'104ull / 2);  // microsoft/Phi-3-mini-4k-instruct index.json total_size; card "3.8B"
  CHECK(params_of("phi-3-mini") == phi);       // 3,821,079,552
}

TEST_CASE("post-attention and post-MLP norms add 2h a layer and nothing else", "[params]") {
  model_spec m = data().model("llama-3.1-8b").spec;
  const param_counts plain = count_params(m);
  m.norms_per_layer = 4;
  const param_counts sandwich = count_params(m);
  CHECK(sandwich.per_layer == plain.per_layer + 2 * m.hidden);
  CHECK(sandwich.matmul == plain.matmul);  // norms are not GEMM weights
  CHECK(sandwich.total == plain.total + 2 * m.hidden * m.layers);
  std::vector<std::string> names;
  for (const param_tensor& t : param_tensors(data().model("gemma-2-9b").spec)) names.push_back(t.name);
  CHECK(std::count(names.begin(), names.end(), "layer{}.attn.post_norm.weight") == 1);
  CHECK(std::count(names.begin(), names.end(), "layer{}.mlp.post_norm.weight") == 1);
  CHECK(std::count(names.begin(), names.end(), "lm_head.weight") == 0);  // tied
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
  CHECK(shape_for_params(3'000'000'000ull, data()).spec.name == "llama-3.2-3b");  // issue 13's presets
  CHECK(shape_for_params(500'000'000ull, data()).spec.name == "qwen2.5-0.5b");
}

TEST_CASE("the --params rule without a preset derives a llama shape within 3%", "[params]") {
  // Sizes no preset has (3B and 0.5B have presets since issue 13: llama-3.2-3b, qwen2.5-0.5b).
  for (std::uint64_t target : {2'000'000'000ull, 20'000'000'000ull, 600'000'000ull, 34'000'000'000ull}) {
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

TEST_CASE("the --params rule refuses a count no derived shape comes within 3% of", "[params]") {
  // Audit: --params 1 planned the smallest shape, 8,716,928 parameters, "+871692700.0% of the request".
  CHECK_THROWS_WITH(shape_for_params(1, data()), Catch::Contains("--params 1") && Catch::Contains("8,716,928"));
  CHECK_THROWS_AS(shape_for_params(5'000'000ull, data()), input_error);
  CHECK(shape_for_params(9'000'000ull, data()).spec.name == "derived");
  // plan max searches over derive_llama_shape, which still returns the closest shape.
  CHECK(count_params(derive_llama_shape(1)).total == 8'716'928ull);
}

TEST_CASE("trainplan and llmc pad the vocabulary rows to 128, V stays the class count", "[params][vocab]") {
  // llm.c's train_gpt2.cu pads V to a multiple of 128: GPT-2's 50257 to 50304.
  const model_spec& gpt2 = data().model("gpt2").spec;
  CHECK(vocab_rows(gpt2, 128) == 50304);
  CHECK(vocab_rows(with_vocab_rows(gpt2, 50304), 128) == 50304);
  CHECK(vocab_rows(with_vocab_rows(gpt2, 1), 128) == 128);
  CHECK(vocab_rows(gpt2, 1) == 50257);
  CHECK(profile_named("trainplan").traits.vocab_pad_multiple == 128);
  CHECK(profile_named("llmc").traits.vocab_pad_multiple == 128);
  CHECK(profile_named("hf").traits.vocab_pad_multiple == 1);
  CHECK(profile_named("megatron").traits.vocab_pad_multiple == 1);
  // The stored layout grows by the padded rows of the (tied) table; the model's own count does not change.
  const model_spec stored = with_vocab_rows(gpt2, vocab_rows(gpt2, 128));
  CHECK(stored.vocab == 50304);
  CHECK(count_params(stored).total == 124'439'808ull + 47 * 768);  // llm.c's num_parameters: 124,475,904
  CHECK(params_of("gpt2") == 124'439'808ull);
}
