// `--params N` as a shape (shape_from_params.hpp): the preset of that nominal size, else a Llama shape derived
// from 12 L h^2 + 2 V h within 3% of the request, or a refusal.
#include "planner/io/shape_from_params.hpp"

#include <fmt/format.h>

#include <cmath>

#include "planner/util/grouped_count.hpp"
#include "planner/util/input_error.hpp"
#include "planner/model/param_count.hpp"

namespace trainplan {
namespace {

std::string human_count(std::uint64_t n) {
  if (n >= 1000000000ull) return fmt::format("{:.2f}B", n / 1e9);
  if (n >= 1000000ull) return fmt::format("{:.1f}M", n / 1e6);
  return fmt::format("{}", n);
}

constexpr double derived_shape_tolerance = 0.03;  // the README's "within 3% of the request"

model_spec llama_shape(std::uint64_t layers, std::uint64_t hidden) {
  model_spec m;
  m.name = "derived";
  m.family = model_family::llama;
  m.layers = layers;
  m.hidden = hidden;
  m.head_dim = hidden >= 1024 ? 128 : 64;
  m.heads = hidden / m.head_dim;
  m.kv_heads = m.heads;
  m.ffn = llama_ffn(hidden);
  m.vocab = 32000;
  m.tied_embeddings = false;
  m.source = "derived from --params by the rule in planner/io/shape_from_params.hpp";
  return m;
}

}  // namespace

model_spec derive_llama_shape(std::uint64_t target_params) {
  const double target = static_cast<double>(target_params);
  const double V = 32000.0;
  model_spec best;
  double best_score = 0, best_error = 0;
  bool have = false, have_close = false;
  for (std::uint64_t L = 2; L <= 200; ++L) {
    // 12 L h^2 + 2 V h = target  (Llama layer ~ 4h^2 attention + 3 h * 8h/3 MLP; untied embeddings)
    const double h_exact = (-2.0 * V + std::sqrt(4.0 * V * V + 48.0 * L * target)) / (24.0 * L);
    const std::uint64_t h = std::max<std::uint64_t>(128, static_cast<std::uint64_t>(std::llround(h_exact / 128.0)) * 128);
    model_spec m = llama_shape(L, h);
    const double error = std::fabs(static_cast<double>(count_params(m).total) - target) / target;
    const double aspect = std::fabs(std::log((static_cast<double>(h) / L) / 128.0));
    const bool close = error <= derived_shape_tolerance;
    if (close && (!have_close || aspect < best_score)) {
      best = m, best_score = aspect, have_close = true, have = true;
    } else if (!have_close && (!have || error < best_error)) {
      best = m, best_error = error, have = true;
    }
  }
  return best;
}

shape_choice shape_for_params(std::uint64_t target_params, const catalog& cat) {
  for (const model_preset& p : cat.models()) {
    if (p.nominal_params == target_params)
      return {p.spec, fmt::format("--params {} picked preset {} ({} parameters), the first preset of that size in "
                                  "data/models.json",
                                  p.nominal_text, p.spec.name, count_params(p.spec).total)};
  }
  model_spec m = derive_llama_shape(target_params);
  const std::uint64_t exact = count_params(m).total;
  // The README promises a derived shape within 3% of the request: below the smallest shape (2 layers of
  // h = 128, mostly the 32000-token embeddings) or in a gap between shapes, refuse rather than plan a model
  // many times the size asked for.
  const double error = std::fabs(static_cast<double>(exact) - static_cast<double>(target_params)) /
                       static_cast<double>(target_params);
  if (!(error <= derived_shape_tolerance)) {
    const std::uint64_t smallest = count_params(llama_shape(2, 128)).total;
    throw input_error(
        exact == smallest
            ? fmt::format("--params {}: smaller than the smallest derived llama shape, {} parameters (2 layers, hidden 128); "
                          "give the shape with --layers/--hidden/--heads/--ffn/--vocab, or --model",
                          human_count(target_params), grouped_count(smallest))
            : fmt::format("--params {}: no derived llama shape is within 3% of it (the nearest has {} parameters); give "
                          "the shape with --layers/--hidden/--heads/--ffn/--vocab, or --model",
                          human_count(target_params), grouped_count(exact)));
  }
  return {m, fmt::format("no preset is nominally {}; derived a llama shape with {} parameters ({:+.1f}% of the "
                         "request) by the rule in the README",
                         human_count(target_params), exact,
                         100.0 * (static_cast<double>(exact) - static_cast<double>(target_params)) /
                             static_cast<double>(target_params))};
}

std::uint64_t llama_ffn(std::uint64_t hidden) { return ((8 * hidden / 3 + 255) / 256) * 256; }

}  // namespace trainplan
