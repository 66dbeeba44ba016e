// Fuzz target: Hugging Face config.json text (planner/io/hf_config.hpp, model_from_hf_config_text), as
// `plan --hf-config` reads it. Any text must give a model or throw input_error. A model it gives must be one
// validate_model accepts (no zero or absurd sizes, kv_heads dividing heads), and counting its parameters,
// what `plan` does next, must give exact counts or input_error, never wrap around.
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz_check.hpp"
#include "planner/io/hf_config.hpp"
#include "planner/model/param_count.hpp"

using namespace trainplan;
using trainplan::fuzz::require;
using trainplan::fuzz::returns_or_input_error;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  model_spec m;
  if (!returns_or_input_error([&] { m = model_from_hf_config_text(text, "config.json"); })) return 0;
  require(returns_or_input_error([&] { validate_model(m); }), "a config gave a model validate_model refuses");
  require(m.head_dim >= 1 && m.kv_heads >= 1 && m.heads % m.kv_heads == 0, "a config gave an impossible attention shape");
  require(m.dropout >= 0.0 && m.dropout < 1.0, "a config gave a dropout outside [0, 1)");
  param_counts counts;
  if (returns_or_input_error([&] { counts = count_params(m); })) {
    require(counts.total >= counts.layers_total && counts.layers_total >= counts.per_layer && counts.per_layer > 0,
            "parameter counts that do not add up (wrapped around?)");
    require(counts.active <= counts.total && counts.routed_experts <= counts.total && counts.active_matmul > 0,
            "active or expert counts beyond the total (MoE configs)");
    require(counts.layers_total >= counts.per_dense_layer && counts.layers_total >= counts.matmul_layers_total,
            "dense-layer or GEMM counts beyond the layers' total (DeepSeek configs)");
  }
  return 0;
}
