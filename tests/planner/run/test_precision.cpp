// Precision regimes as layouts of buffers (planner/run/precision.hpp): which copies of the weights, gradients
// and optimizer state each keeps and in which dtype, so that the bytes per parameter follow from the layout.
// The figures are the regimes' own descriptions: Micikevicius et al. 2018 (mixed precision: 16-bit weights and
// gradients, fp32 master and Adam state, 2 + 2 + 4 + 8 = 16 B/param); PyTorch autocast over an fp32 model (4 + 4
// + 8 = 16); pure bf16 with PyTorch's state in the parameter's dtype (2 + 2 + 2 + 2 = 8); Megatron-LM's fp32
// main_grad (2 + 4 + 4 + 8 = 18); the Ultra-scale Playbook's fp32 gradient accumulation column (16 + 4 = 20).
#include <catch2/catch.hpp>

#include <set>
#include <sstream>
#include <string>

#include "planner/run/precision.hpp"
#include "planner/util/input_error.hpp"

using namespace trainplan;

namespace {

// Bytes per trained parameter of the model state under AdamW (two state buffers): weights, the master copy,
// the gradients, the fp32 accumulation buffer, m and v.
std::uint64_t adamw_bytes_per_param(const precision_layout& l) {
  return dtype_bytes(l.weights) + (l.master ? dtype_bytes(*l.master) : 0) + dtype_bytes(l.grads) +
         (l.grad_accum ? dtype_bytes(*l.grad_accum) : 0) + 2 * dtype_bytes(l.optimizer_state);
}

precision_layout layout_of(precision_regime p, grad_dtype_choice g = grad_dtype_choice::automatic) {
  return make_precision_layout(p, g);
}

}  // namespace

TEST_CASE("precision: each regime's bytes per parameter under AdamW follow from its buffers", "[precision]") {
  CHECK(adamw_bytes_per_param(layout_of(precision_regime::fp32)) == 4 + 4 + 8);
  CHECK(adamw_bytes_per_param(layout_of(precision_regime::bf16_mixed)) == 2 + 4 + 2 + 8);
  CHECK(adamw_bytes_per_param(layout_of(precision_regime::fp16_mixed)) == 2 + 4 + 2 + 8);
  CHECK(adamw_bytes_per_param(layout_of(precision_regime::fp8_mixed)) == 2 + 4 + 2 + 8);
  CHECK(adamw_bytes_per_param(layout_of(precision_regime::bf16)) == 2 + 2 + 4);
  CHECK(adamw_bytes_per_param(layout_of(precision_regime::amp_bf16)) == 4 + 4 + 8);
  CHECK(adamw_bytes_per_param(layout_of(precision_regime::amp_fp16)) == 4 + 4 + 8);
  CHECK(adamw_bytes_per_param(layout_of(precision_regime::megatron_bf16)) == 2 + 4 + 4 + 8);
  // --grad-dtype fp32 adds a 4-byte accumulation buffer where gradients are 16-bit, and nothing where they
  // are fp32 already.
  CHECK(adamw_bytes_per_param(layout_of(precision_regime::bf16_mixed, grad_dtype_choice::fp32)) == 20);
  CHECK(adamw_bytes_per_param(layout_of(precision_regime::bf16, grad_dtype_choice::fp32)) == 12);
  CHECK(adamw_bytes_per_param(layout_of(precision_regime::fp32, grad_dtype_choice::fp32)) == 16);
  CHECK(adamw_bytes_per_param(layout_of(precision_regime::megatron_bf16, grad_dtype_choice::fp32)) == 18);
  CHECK(adamw_bytes_per_param(layout_of(precision_regime::amp_bf16, grad_dtype_choice::fp32)) == 16);
}

TEST_CASE("precision: GEMM inputs, saved activations and the caches each regime keeps", "[precision]") {
  const precision_layout fp32 = layout_of(precision_regime::fp32);
  CHECK(fp32.compute == dtype::fp32);
  CHECK(fp32.activations == dtype::fp32);
  CHECK_FALSE(fp32.master.has_value());
  // Autocast runs the GEMMs in 16 bits over fp32 weights, keeps their 16-bit copies until the backward, and
  // scales the loss only in fp16 (GradScaler).
  const precision_layout amp_bf16 = layout_of(precision_regime::amp_bf16), amp_fp16 = layout_of(precision_regime::amp_fp16);
  CHECK(amp_bf16.compute == dtype::bf16);
  CHECK(amp_bf16.weights == dtype::fp32);
  CHECK(amp_bf16.autocast_weight_cache);
  CHECK_FALSE(amp_bf16.loss_scaling);
  CHECK(amp_fp16.compute == dtype::fp16);
  CHECK(amp_fp16.activations == dtype::fp16);
  CHECK(amp_fp16.autocast_weight_cache);
  CHECK(amp_fp16.loss_scaling);
  // fp16 mixed precision needs loss scaling (fp16's 5-bit exponent), bf16 mixed precision does not.
  CHECK(layout_of(precision_regime::fp16_mixed).loss_scaling);
  CHECK_FALSE(layout_of(precision_regime::bf16_mixed).loss_scaling);
  // Transformer Engine's fp8: fp8 GEMMs, their inputs saved in fp8, fp8 copies of the weights.
  const precision_layout fp8 = layout_of(precision_regime::fp8_mixed);
  CHECK(fp8.compute == dtype::fp8);
  CHECK(fp8.gemm_input_saved == std::optional<dtype>(dtype::fp8));
  CHECK(fp8.fp8_weight_cache);
  CHECK(fp8.activations == dtype::bf16);
  // No other regime caches weights or saves GEMM inputs apart.
  for (precision_regime p : {precision_regime::fp32, precision_regime::bf16_mixed, precision_regime::fp16_mixed,
                             precision_regime::bf16, precision_regime::megatron_bf16}) {
    INFO(precision_name(p));
    CHECK_FALSE(layout_of(p).autocast_weight_cache);
    CHECK_FALSE(layout_of(p).fp8_weight_cache);
    CHECK_FALSE(layout_of(p).gemm_input_saved.has_value());
  }
}

TEST_CASE("precision: the optimizer reads gradients in the accumulation buffer's dtype when there is one", "[precision]") {
  CHECK(layout_of(precision_regime::bf16_mixed).optimizer_grad_dtype() == dtype::bf16);
  CHECK(layout_of(precision_regime::bf16_mixed, grad_dtype_choice::fp32).optimizer_grad_dtype() == dtype::fp32);
  CHECK(layout_of(precision_regime::megatron_bf16).optimizer_grad_dtype() == dtype::fp32);
  // Asking for the dtype the regime already keeps changes nothing.
  CHECK_FALSE(layout_of(precision_regime::bf16_mixed, grad_dtype_choice::bf16).grad_accum.has_value());
  CHECK_FALSE(layout_of(precision_regime::fp16_mixed, grad_dtype_choice::fp16).grad_accum.has_value());
}

TEST_CASE("precision: a 16-bit gradient dtype the regime does not keep is refused, naming both", "[precision][errors]") {
  CHECK_THROWS_WITH(layout_of(precision_regime::fp32, grad_dtype_choice::bf16),
                    "--grad-dtype bf16: precision fp32 keeps gradients in fp32");
  CHECK_THROWS_WITH(layout_of(precision_regime::bf16, grad_dtype_choice::fp16),
                    "--grad-dtype fp16: precision bf16 keeps gradients in bf16");
  CHECK_THROWS_AS(layout_of(precision_regime::amp_bf16, grad_dtype_choice::bf16), input_error);
  CHECK_THROWS_AS(layout_of(precision_regime::megatron_bf16, grad_dtype_choice::bf16), input_error);
}

TEST_CASE("precision: regime and gradient dtype names parse back in any case, with a suggestion for a slip", "[precision][names]") {
  // Every listed name parses to a regime whose name it is, and no two regimes share one.
  std::stringstream listed(precision_names(","));
  std::set<precision_regime> seen;
  for (std::string name; std::getline(listed, name, ',');) {
    INFO(name);
    const precision_regime p = parse_precision(name);
    CHECK(precision_name(p) == name);
    seen.insert(p);
  }
  CHECK(seen.size() == 8);  // fp32, bf16-mixed, fp16-mixed, bf16, fp8-mixed, amp-bf16, amp-fp16, megatron-bf16
  CHECK(parse_precision("AMP-BF16") == precision_regime::amp_bf16);
  CHECK(parse_precision("Megatron-BF16") == precision_regime::megatron_bf16);
  // "bf16mixed": d = 1 from bf16-mixed (3 <= 10).
  CHECK_THROWS_WITH(parse_precision("bf16mixed"), Catch::StartsWith("--precision: unknown regime 'bf16mixed'") &&
                                                      Catch::EndsWith("did you mean 'bf16-mixed'?"));
  // "fp16" alone is two regimes (Hugging Face's autocast, Megatron's fp16 weights): both named, neither chosen.
  CHECK_THROWS_WITH(parse_precision("fp16"), Catch::Contains("'amp-fp16'") && Catch::Contains("'fp16-mixed'"));
  CHECK(parse_grad_dtype("AUTO") == grad_dtype_choice::automatic);
  CHECK(parse_grad_dtype("fp32") == grad_dtype_choice::fp32);
  CHECK(grad_dtype_choice_name(grad_dtype_choice::fp16) == "fp16");
  CHECK_THROWS_WITH(parse_grad_dtype("fp8"), Catch::StartsWith("--grad-dtype: unknown dtype 'fp8' (known: auto, fp32, bf16, fp16)"));
}
