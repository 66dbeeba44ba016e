// Fuzz target: the data files (planner/io/catalog.hpp), at the text level the loader uses for data/ and
// --data-dir. Each input is tried as each document in turn, beside small valid companions:
//   - gpus.json and models.json through catalog::from_text;
//   - calibration.json through apply_calibration over the built-in catalog, both as the file that
//     replaces the defaults (from_text, data/) and as a --data-dir file that overrides some keys.
// Any text must load or throw input_error. A catalog that loads must keep the loader's promises: every GPU
// is found by its name and each alias (not another GPU of that name), every preset by its name and passes
// validate_model, and every GPU's calibration stays within the ranges the loader checks (the planner
// divides and multiplies by these).
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>

#include "fuzz/fuzz_check.hpp"
#include "planner/io/catalog.hpp"
#include "planner/io/embedded_data.hpp"

using namespace trainplan;
using trainplan::fuzz::require;
using trainplan::fuzz::returns_or_input_error;

namespace {

constexpr std::string_view no_gpus = R"({"gpus": []})";
constexpr std::string_view no_models = R"({"models": []})";
constexpr std::string_view default_calibration = R"({"default": {"cuda_context_bytes": 1, "cublas_workspace_bytes": 1,
  "allocator_slack_fraction": 0.02, "safety_margin_fraction": 0.05, "source": "fuzz",
  "profiles": {"hf": {"cuda_context_bytes": 1, "timing": {"gemm_efficiency": 0.7, "gemm_half_dim": 64, "fp32_gemm_efficiency": 0.85, "attention_efficiency": 0.4, "bandwidth_fraction": 0.8, "kernel_seconds": 4e-6, "step_seconds": 0, "foreach_tensor_seconds": 0}},
               "llmc": {"timing": {"gemm_efficiency": 0.7, "gemm_half_dim": 64, "fp32_gemm_efficiency": 0.85, "attention_efficiency": 0.4, "bandwidth_fraction": 0.8, "kernel_seconds": 4e-6, "step_seconds": 0, "foreach_tensor_seconds": 0}},
               "megatron": {"timing": {"gemm_efficiency": 0.7, "gemm_half_dim": 64, "fp32_gemm_efficiency": 0.85, "attention_efficiency": 0.4, "bandwidth_fraction": 0.8, "kernel_seconds": 4e-6, "step_seconds": 0, "foreach_tensor_seconds": 0}},
               "trainplan": {"timing": {"gemm_efficiency": 0.7, "gemm_half_dim": 64, "fp32_gemm_efficiency": 0.85, "attention_efficiency": 0.4, "bandwidth_fraction": 0.8, "kernel_seconds": 4e-6, "step_seconds": 0, "foreach_tensor_seconds": 0}}}}, "gpus": {}})";

std::string_view embedded(std::string_view name) {
  for (const embedded_file& f : embedded_data_files())
    if (f.name == name) return f.bytes;
  fuzz::finding("a data file is not embedded");
}

void check_catalog(const catalog& c) {
  for (const gpu_spec& g : c.gpus()) {
    require(&c.gpu(g.name) == &g, "a GPU is not found by its name (another GPU has it)");
    require(g.memory_bytes >= 1 && g.memory_bytes <= (1ull << 50), "a GPU's memory_bytes escaped its range");
    require(std::isfinite(g.memory_bandwidth_bytes_per_s) && g.memory_bandwidth_bytes_per_s > 0 &&
                std::isfinite(g.host_link_bytes_per_s) && g.host_link_bytes_per_s > 0,
            "a GPU's bandwidths escaped their ranges");
    for (const std::optional<double>& tflops : g.peak_dense_tflops)
      require(!tflops || (*tflops >= 1 && *tflops <= 1e5), "a GPU's peak escaped its range");
    for (const std::string& alias : g.aliases) require(&c.gpu(alias) == &g, "a GPU is not found by its alias");
    const calibration k = c.calibration_for(g);
    require(k.cuda_context_bytes <= (1ull << 50) && k.cublas_workspace_bytes <= (1ull << 50),
            "calibration bytes escaped their range");
    require(k.allocator_slack_fraction >= 0 && k.allocator_slack_fraction <= 1, "allocator_slack_fraction escaped [0, 1]");
    require(k.safety_margin_fraction >= 0 && k.safety_margin_fraction < 1, "safety_margin_fraction escaped [0, 1)");
    for (const stack_calibration& stack : k.stacks) {
      require(!stack.cuda_context_bytes || *stack.cuda_context_bytes <= (1ull << 50), "a stack's context escaped its range");
      require(!stack.allocator_slack_fraction || (*stack.allocator_slack_fraction >= 0 && *stack.allocator_slack_fraction <= 1),
              "a stack's allocator_slack_fraction escaped [0, 1]");
      const timing_constants& t = stack.timing;
      require(t.gemm_efficiency > 0 && t.gemm_efficiency <= 1 && t.fp32_gemm_efficiency > 0 &&
                  t.fp32_gemm_efficiency <= 1 && t.attention_efficiency > 0 && t.attention_efficiency <= 1 &&
                  t.bandwidth_fraction > 0 && t.bandwidth_fraction <= 1,
              "a timing efficiency escaped (0, 1]");
      require(t.gemm_half_dim >= 0 && t.gemm_half_dim <= 1e6 && t.kernel_seconds >= 0 && t.kernel_seconds <= 1 &&
                  t.step_seconds >= 0 && t.step_seconds <= 3600 && t.foreach_tensor_seconds >= 0 &&
                  t.foreach_tensor_seconds <= 1,
              "a timing constant escaped its range");
    }
  }
  for (const model_preset& p : c.models()) {
    require(&c.model(p.spec.name) == &p, "a preset is not found by its name (another preset has it)");
    require(returns_or_input_error([&] { validate_model(p.spec); }), "a preset validate_model refuses was loaded");
    require(p.nominal_params >= 1, "a preset's nominal_params is below 1");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  static const catalog built_in =
      catalog::from_text(embedded("gpus.json"), embedded("models.json"), embedded("calibration.json"));

  catalog c;
  if (returns_or_input_error([&] { c = catalog::from_text(text, no_models, default_calibration); })) check_catalog(c);
  if (returns_or_input_error([&] { c = catalog::from_text(no_gpus, text, default_calibration); })) check_catalog(c);
  c = built_in;
  if (returns_or_input_error([&] { c.apply_calibration(text, true); })) check_catalog(c);
  c = built_in;
  if (returns_or_input_error([&] { c.apply_calibration(text, false); })) check_catalog(c);
  return 0;
}
