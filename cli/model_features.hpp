#pragma once
// The model options beyond a plain family's block, in words for the text report and `plan models`.
#include <string>

#include "planner/model/model_spec.hpp"

namespace trainplan::cli {

// "4 norms/layer, GeGLU, embeddings x sqrt(h), attention soft cap 50, logit soft cap 30, window 4096 on
// 21 of 42 layers"; empty for a plain gpt or llama model.
std::string model_features_text(const model_spec& m);

}  // namespace trainplan::cli
