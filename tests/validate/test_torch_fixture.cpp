// The harness against PyTorch (tests/make_torch_fixture.py): same shapes, same seed-derived weights, same
// tokens; logits' loss, every gradient, and the losses of three AdamW steps.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "validate/training_run.hpp"

using namespace trainplan;
using json = nlohmann::json;

namespace {

const json& fixture() {
  static const json j = [] {
    std::ifstream in(std::string(TRAINPLAN_TEST_DATA) + "/torch_fixture.json");
    REQUIRE(in);
    return json::parse(in);
  }();
  return j;
}

model_spec spec_of(const json& cfg) {
  model_spec m;
  m.name = "fixture";
  m.family = cfg["family"] == "gpt" ? model_family::gpt : model_family::llama;
  m.layers = cfg["layers"];
  m.hidden = cfg["hidden"];
  m.heads = cfg["heads"];
  m.kv_heads = cfg["kv_heads"];
  m.head_dim = m.hidden / m.heads;
  m.ffn = cfg["ffn"];
  m.vocab = cfg["vocab"];
  m.max_positions = cfg["max_positions"];
  m.tied_embeddings = cfg["tied"];
  return m;
}

run_config run_of(const json& cfg, precision_regime precision) {
  run_config r;
  r.seq = cfg["seq"];
  r.micro_batch = cfg["batch"];
  r.precision = precision;
  r.attention = attention_kind::eager;
  return r;
}

// The harness stores the vocabulary tables padded to a multiple of 128 rows (llm.c's Vp; the fixture's V = 32
// becomes 128), PyTorch's hold V: the first n elements are PyTorch's, the padded rows hold zero.
kernels::view unpadded(const kernels::view& stored, std::size_t n) {
  REQUIRE(stored.size >= n);
  for (std::size_t i = n; i < stored.size; ++i) REQUIRE(stored.get(i) == 0.0f);
  return stored.slice(0, n);
}

void use_fixture_batch(validate::training_run& run, const json& c) {
  run.net.fixed_tokens = c["tokens"].get<std::vector<std::int32_t>>();
  run.net.fixed_targets = c["targets"].get<std::vector<std::int32_t>>();
}

}  // namespace

TEST_CASE("fp32 harness matches PyTorch: loss, every gradient, AdamW losses", "[validate][torch]") {
  for (const json& c : fixture()["cases"]) {
    const model_spec m = spec_of(c["config"]);
    INFO(family_name(m.family));
    for (attention_kind att : {attention_kind::eager, attention_kind::flash}) {
      run_config r = run_of(c["config"], precision_regime::fp32);
      r.attention = att;
      validate::training_run run(m, r);
      use_fixture_batch(run, c);
      run.net.run_micro_batch(0, 0, 1.0f);
      const double loss = run.net.take_mean_loss();
      // fp32 on both sides; sums of at most a few hundred terms in a different order: 1e-5 relative.
      CHECK(loss == Approx(c["loss"].get<double>()).epsilon(1e-5));
      for (const auto& [name, values] : c["grads"].items()) {
        INFO(name);
        const kernels::view g = unpadded(run.state.grad(name), values.size());
        double max_err = 0;
        for (std::size_t i = 0; i < g.size; ++i) {
          const double ref = values[i].get<double>();
          // abs 1e-6 covers gradients that cancel to ~0; 1e-4 relative is ~1000 fp32 ulps, room for the
          // reordered accumulation through two layers of softmax and normalisation backward.
          const double allowed = 1e-6 + 1e-4 * std::abs(ref);
          max_err = std::max(max_err, std::abs(g.get(i) - ref) / allowed);
        }
        CHECK(max_err <= 1.0);
      }
    }
    validate::training_run run(m, run_of(c["config"], precision_regime::fp32));
    use_fixture_batch(run, c);
    for (std::size_t s = 0; s < c["adamw_losses"].size(); ++s) {
      const validate::step_record rec = run.step();
      CHECK(rec.loss == Approx(c["adamw_losses"][s].get<double>()).epsilon(1e-5));
    }
    // The padded rows stay zero through AdamW (weight decay included): no gradient ever reaches them.
    for (const char* table : {"embed.tokens", "lm_head.weight"})
      if (run.state.has(table)) unpadded(run.state.weight(table), m.vocab * m.hidden);
  }
}

TEST_CASE("bf16-mixed harness stays within bf16 precision of the fp32 PyTorch reference", "[validate][torch]") {
  for (const json& c : fixture()["cases"]) {
    const model_spec m = spec_of(c["config"]);
    INFO(family_name(m.family));
    validate::training_run run(m, run_of(c["config"], precision_regime::bf16_mixed));
    use_fixture_batch(run, c);
    run.net.run_micro_batch(0, 0, 1.0f);
    const double loss = run.net.take_mean_loss();
    // bf16 keeps 8 significant bits (eps 2^-8 = 0.0039); the loss passes through two layers of bf16
    // activations and weights, each rounding at most eps/2: allow 4 eps relative.
    CHECK(loss == Approx(c["loss"].get<double>()).epsilon(4 * 0.0039));
    // Gradients: compare their norm per tensor (single elements can lose all bits to cancellation).
    for (const auto& [name, values] : c["grads"].items()) {
      INFO(name);
      const kernels::view g = unpadded(run.state.grad(name), values.size());
      double diff = 0, ref_norm = 0;
      for (std::size_t i = 0; i < g.size; ++i) {
        const double ref = values[i].get<double>();
        diff += (g.get(i) - ref) * (g.get(i) - ref);
        ref_norm += ref * ref;
      }
      // Relative error of the whole tensor within 8 eps: rounding of inputs, weights and the stored
      // gradient each add up to eps/2, through a backward of depth ~10 ops.
      CHECK(std::sqrt(diff) <= 8 * 0.0039 * std::sqrt(ref_norm) + 1e-7);
    }
  }
}
