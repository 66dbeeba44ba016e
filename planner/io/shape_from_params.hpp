#pragma once
// `--params 7B`: which shape the planner assumes for a parameter count.
//
// Rule (documented in the README):
//  1. The first preset in data/models.json whose nominal size equals the request ("7B" -> llama-2-7b,
//     listed before mistral-7b).
//  2. Otherwise a derived llama-family shape: head_dim 128 (64 below hidden 1024), as many kv heads as
//     heads, vocab 32000, untied embeddings, ffn = 8h/3 rounded up to a multiple of 256 (Llama's rule).
//     For every depth L from 2 to 200 the hidden size closest to the request (a multiple of 128) is
//     found; among shapes within 3% of the request, the one whose h/L is closest to 128 (Llama-2 7B and
//     13B) wins. If none is within 3% (below the smallest shape, 2 layers of h = 128, or in a gap between
//     shapes), shape_for_params throws input_error naming the nearest and the smallest count;
//     derive_llama_shape alone returns the closest count (plan max searches over it).
#include <cstdint>
#include <string>

#include "planner/io/catalog.hpp"
#include "planner/model/model_spec.hpp"

namespace trainplan {

struct shape_choice {
  model_spec spec;
  std::string rule;  // one sentence: which rule picked this shape
};

shape_choice shape_for_params(std::uint64_t target_params, const catalog& cat);

// The derived shape of rule 2 alone (exposed for tests).
model_spec derive_llama_shape(std::uint64_t target_params);

// Llama's MLP width for a hidden size: 8h/3 rounded up to a multiple of 256 (its multiple_of=256 over 2/3 x 4h).
std::uint64_t llama_ffn(std::uint64_t hidden);

}  // namespace trainplan
