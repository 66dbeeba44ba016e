// Precision regimes as buffer layouts (precision.hpp): for each regime the dtypes of the weights, master copy,
// gradients, optimizer state and saved activations, each with the framework behaviour it follows.
#include "planner/run/precision.hpp"

#include <fmt/format.h>

#include "planner/util/input_error.hpp"
#include "planner/util/names.hpp"

namespace trainplan {
namespace {

constexpr named<precision_regime> regime_names[] = {
    {precision_regime::fp32, "fp32"},           {precision_regime::bf16_mixed, "bf16-mixed"},
    {precision_regime::fp16_mixed, "fp16-mixed"}, {precision_regime::bf16, "bf16"},
    {precision_regime::fp8_mixed, "fp8-mixed"}, {precision_regime::amp_bf16, "amp-bf16"},
    {precision_regime::amp_fp16, "amp-fp16"},   {precision_regime::megatron_bf16, "megatron-bf16"},
};
constexpr named<grad_dtype_choice> grad_dtype_names[] = {
    {grad_dtype_choice::automatic, "auto"}, {grad_dtype_choice::fp32, "fp32"},
    {grad_dtype_choice::bf16, "bf16"},      {grad_dtype_choice::fp16, "fp16"},
};

}  // namespace

std::string_view precision_name(precision_regime p) { return name_of(regime_names, p); }

precision_regime parse_precision(std::string_view text) {
  // "fp16" alone names two regimes, and neither is the default of every stack: said, not guessed.
  if (same_name(text, "fp16"))
    throw input_error("--precision: 'fp16' is one of two regimes here: 'amp-fp16' (autocast over fp32 weights with a "
                      "GradScaler, Hugging Face's --fp16) or 'fp16-mixed' (fp16 weights and an fp32 master copy, as "
                      "Megatron and DeepSpeed run fp16)");
  return parse_named(regime_names, text, "--precision", "regime");
}

std::string precision_names(std::string_view separator) { return joined_names(names_of(regime_names), separator); }

std::string_view grad_dtype_choice_name(grad_dtype_choice g) { return name_of(grad_dtype_names, g); }

grad_dtype_choice parse_grad_dtype(std::string_view text) {
  return parse_named(grad_dtype_names, text, "--grad-dtype", "dtype");
}

precision_layout make_precision_layout(precision_regime regime, grad_dtype_choice grad_dtype) {
  precision_layout l;
  l.regime = regime;
  switch (regime) {
    case precision_regime::fp32:
      l.compute = l.weights = l.grads = l.activations = l.optimizer_state = dtype::fp32;
      break;
    case precision_regime::bf16_mixed:
      l.master = dtype::fp32;
      break;
    case precision_regime::fp16_mixed:
      l.compute = l.weights = l.grads = l.activations = dtype::fp16;
      l.master = dtype::fp32;
      l.loss_scaling = true;
      break;
    case precision_regime::bf16:
      l.optimizer_state = dtype::bf16;  // PyTorch creates optimizer state in the parameter's dtype
      break;
    case precision_regime::fp8_mixed:
      // Assumptions (NVIDIA Transformer Engine, fp8 "hybrid" recipe, Micikevicius et al. 2022): bf16
      // weights with fp32 master and bf16 grads as in bf16-mixed; each GEMM weight also cached in fp8
      // twice (row-wise for forward, column-wise for backward, as Hopper fp8 GEMMs need both layouts);
      // the inputs of GEMMs saved for backward in fp8; every other activation in bf16.
      l.compute = dtype::fp8;
      l.master = dtype::fp32;
      l.gemm_input_saved = dtype::fp8;
      l.fp8_weight_cache = true;
      break;
    case precision_regime::amp_bf16:
      // torch.autocast(dtype=bfloat16) over an fp32 model: fp32 weights and grads (4 + 4 bytes/param),
      // no master copy (the weights are the master). Autocast casts each GEMM weight to bf16 in forward
      // and autograd keeps that copy until the layer's backward.
      l.weights = l.grads = l.optimizer_state = dtype::fp32;
      l.autocast_weight_cache = true;
      break;
    case precision_regime::amp_fp16:
      // torch.autocast(dtype=float16) over an fp32 model with torch.amp.GradScaler: as amp-bf16 with fp16
      // GEMMs; the scaler's scale and found-inf flags are scalars, and unscaling is in place.
      l.compute = l.activations = dtype::fp16;
      l.weights = l.grads = l.optimizer_state = dtype::fp32;
      l.autocast_weight_cache = true;
      l.loss_scaling = true;
      break;
    case precision_regime::megatron_bf16:
      // Megatron-LM with --bf16 (Shoeybi et al.; "main_grad"): bf16 weights, gradients accumulated
      // straight into an fp32 buffer, fp32 master and Adam: 2 + 4 + 4 + 8 = 18 bytes/param.
      l.master = dtype::fp32;
      l.grads = dtype::fp32;
      break;
  }
  switch (grad_dtype) {
    case grad_dtype_choice::automatic: break;
    case grad_dtype_choice::fp32:
      if (l.grads != dtype::fp32) l.grad_accum = dtype::fp32;
      break;
    case grad_dtype_choice::bf16:
    case grad_dtype_choice::fp16: {
      dtype wanted = grad_dtype == grad_dtype_choice::bf16 ? dtype::bf16 : dtype::fp16;
      if (wanted != l.grads)
        throw input_error(fmt::format("--grad-dtype {}: precision {} keeps gradients in {}",
                                      dtype_name(wanted), precision_name(regime), dtype_name(l.grads)));
      break;
    }
  }
  return l;
}

}  // namespace trainplan
