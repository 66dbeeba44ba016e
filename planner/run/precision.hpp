#pragma once
// Precision regimes: which copies of the parameters exist, in which dtype, and what activations are
// saved in. Each regime is written down as the layout of buffers it keeps, so that "16 bytes/param" is a
// consequence of the layout, not a constant.
#include <optional>
#include <string>
#include <string_view>

#include "planner/util/dtype.hpp"

namespace trainplan {

enum class precision_regime {
  fp32,           // everything fp32: 4 (weights) + 4 (grads) bytes/param before the optimizer
  bf16_mixed,     // bf16 weights and grads, fp32 master: 2 + 2 + 4 (Micikevicius et al. 2018, with bf16)
  fp16_mixed,     // as bf16_mixed in fp16, plus dynamic loss scaling (a few bytes of scalars)
  bf16,           // pure bf16: no master copy, optimizer state in bf16 too
  fp8_mixed,      // Transformer Engine style: bf16_mixed plus fp8 copies of GEMM weights and inputs
  amp_bf16,       // PyTorch autocast: fp32 weights/grads; bf16 copies of GEMM weights live fwd..bwd
  amp_fp16,       // PyTorch autocast to fp16 with a GradScaler: as amp_bf16 with fp16 GEMMs
  megatron_bf16,  // Megatron-LM: bf16 weights, fp32 main_grad accumulated directly, fp32 master: 18 B/param
};

// --grad-dtype: "auto" keeps the regime's own gradient dtype; "fp32" adds an fp32 accumulation buffer
// (the Ultra-scale Playbook's 20 bytes/param column) where gradients are otherwise 16-bit.
enum class grad_dtype_choice { automatic, fp32, bf16, fp16 };

std::string_view precision_name(precision_regime p);
precision_regime parse_precision(std::string_view text);   // throws input_error
std::string precision_names(std::string_view separator);   // every regime's name, in the order --help lists them
std::string_view grad_dtype_choice_name(grad_dtype_choice g);
grad_dtype_choice parse_grad_dtype(std::string_view text);  // throws input_error

struct precision_layout {
  precision_regime regime = precision_regime::bf16_mixed;
  dtype compute = dtype::bf16;            // GEMM input dtype: picks the GPU peak for MFU/HFU
  dtype weights = dtype::bf16;            // the copy the forward pass reads
  std::optional<dtype> master;            // fp32 master copy the optimizer updates
  dtype grads = dtype::bf16;              // what the backward pass writes
  std::optional<dtype> grad_accum;        // extra accumulation buffer (--grad-dtype fp32)
  dtype activations = dtype::bf16;        // saved activations
  std::optional<dtype> gemm_input_saved;  // fp8: GEMM inputs are saved in this dtype instead
  dtype optimizer_state = dtype::fp32;    // m, v...: the master dtype, else the weight dtype
  bool loss_scaling = false;
  bool fp8_weight_cache = false;          // fp8 copies of GEMM weights (row- and column-wise)
  bool autocast_weight_cache = false;     // autocast's bf16 copies of GEMM weights, saved for backward

  // The dtype the optimizer reads gradients in (reported as run.grad_dtype).
  dtype optimizer_grad_dtype() const { return grad_accum.value_or(grads); }
};

precision_layout make_precision_layout(precision_regime regime, grad_dtype_choice grad_dtype);  // throws input_error

}  // namespace trainplan
