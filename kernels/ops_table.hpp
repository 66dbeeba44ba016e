#pragma once
// What a harness backend provides: memory where it computes, copies in and out, and every kernel of a
// training step. The CPU references fill one table (cpu_kernel_ops); the CUDA kernels, with the same
// signatures, another (kernels/cuda/ops.hpp, cuda_kernel_ops). The transformer only calls through it.
#include <cstddef>
#include <cstdint>

#include "kernels/activation.hpp"
#include "kernels/adamw.hpp"
#include "kernels/attention.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/dropout.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gemm.hpp"
#include "kernels/norm.hpp"

namespace trainplan::kernels {

// Function types of the kernels, named so the table below can reuse their names for its members.
using linear_forward_fn = decltype(&linear_forward);
using linear_backward_input_fn = decltype(&linear_backward_input);
using linear_backward_weight_fn = decltype(&linear_backward_weight);
using layer_norm_forward_fn = decltype(&layer_norm_forward);
using layer_norm_backward_fn = decltype(&layer_norm_backward);
using rms_norm_forward_fn = decltype(&rms_norm_forward);
using rms_norm_backward_fn = decltype(&rms_norm_backward);
using gelu_forward_fn = decltype(&gelu_forward);
using gelu_backward_fn = decltype(&gelu_backward);
using swiglu_forward_fn = decltype(&swiglu_forward);
using swiglu_backward_fn = decltype(&swiglu_backward);
using dropout_mask_fn = decltype(&dropout_mask);
using cross_entropy_forward_backward_fn = decltype(&cross_entropy_forward_backward);
using adamw_step_fn = decltype(&adamw_step);
using has_non_finite_fn = decltype(&has_non_finite);
using embedding_forward_fn = decltype(&embedding_forward);
using embedding_backward_fn = decltype(&embedding_backward);
using eager_attention_forward_fn = decltype(&eager_attention_forward);
using eager_attention_backward_fn = decltype(&eager_attention_backward);
using flash_attention_forward_fn = decltype(&flash_attention_forward);
using flash_attention_backward_fn = decltype(&flash_attention_backward);
using rope_apply_fn = decltype(&rope_apply);
using residual_dropout_fn = decltype(&residual_dropout);
using dropout_apply_fn = decltype(&dropout_apply);
using convert_fn = decltype(&convert);
using fill_fn = decltype(&fill);
using accumulate_and_clear_fn = decltype(&accumulate_and_clear);

struct kernel_ops {
  const char* backend;  // "cpu", "cuda"
  void* (*alloc)(std::size_t bytes);  // zero-filled
  void (*release)(void* ptr);
  void (*upload)(void* dst, const void* host_src, std::size_t bytes);
  void (*download)(void* host_dst, const void* src, std::size_t bytes);
  void (*synchronize)();
  std::uint64_t (*device_used_bytes)();  // memory in use on the device, all of it (0 on the CPU)

  linear_forward_fn linear_forward;
  linear_backward_input_fn linear_backward_input;
  linear_backward_weight_fn linear_backward_weight;
  layer_norm_forward_fn layer_norm_forward;
  layer_norm_backward_fn layer_norm_backward;
  rms_norm_forward_fn rms_norm_forward;
  rms_norm_backward_fn rms_norm_backward;
  gelu_forward_fn gelu_forward;
  gelu_backward_fn gelu_backward;
  swiglu_forward_fn swiglu_forward;
  swiglu_backward_fn swiglu_backward;
  dropout_mask_fn dropout_mask;
  cross_entropy_forward_backward_fn cross_entropy_forward_backward;
  adamw_step_fn adamw_step;
  has_non_finite_fn has_non_finite;
  embedding_forward_fn embedding_forward;
  embedding_backward_fn embedding_backward;
  eager_attention_forward_fn eager_attention_forward;
  eager_attention_backward_fn eager_attention_backward;
  flash_attention_forward_fn flash_attention_forward;
  flash_attention_backward_fn flash_attention_backward;
  rope_apply_fn rope_apply;
  residual_dropout_fn residual_dropout;
  dropout_apply_fn dropout_apply;
  convert_fn convert;
  fill_fn fill;
  accumulate_and_clear_fn accumulate_and_clear;
};

const kernel_ops& cpu_kernel_ops();

}  // namespace trainplan::kernels
