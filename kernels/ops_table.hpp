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
#include "kernels/moe_combine.hpp"
#include "kernels/moe_permute.hpp"
#include "kernels/moe_router.hpp"
#include "kernels/norm.hpp"

namespace trainplan::kernels {

// Every kernel of the table, once: the struct's members and both backends' fill-ins come from this list,
// so an entry can neither be missing nor land in the wrong slot (several kernels share a signature).
#define TRAINPLAN_KERNEL_OPS(X) \
  X(linear_forward) \
  X(linear_backward_input) \
  X(linear_backward_weight) \
  X(layer_norm_forward) \
  X(layer_norm_backward) \
  X(rms_norm_forward) \
  X(rms_norm_backward) \
  X(residual_norm_forward) \
  X(gelu_forward) \
  X(gelu_backward) \
  X(swiglu_forward) \
  X(swiglu_backward) \
  X(dropout_mask) \
  X(cross_entropy_forward_backward) \
  X(adamw_step) \
  X(has_non_finite) \
  X(embedding_forward) \
  X(embedding_backward) \
  X(eager_attention_forward) \
  X(eager_attention_backward) \
  X(flash_attention_forward) \
  X(flash_attention_backward) \
  X(rope_apply) \
  X(residual_dropout) \
  X(dropout_apply) \
  X(convert) \
  X(fill) \
  X(accumulate_and_clear)

// Kernels only the CPU has so far: the CUDA table leaves them null, and the harness refuses what needs
// them there (Mixture of Experts: validate/transformer.cpp).
#define TRAINPLAN_CPU_ONLY_KERNEL_OPS(X) \
  X(moe_router_forward) \
  X(moe_router_backward) \
  X(moe_permute_forward) \
  X(moe_permute_backward) \
  X(moe_combine_forward) \
  X(moe_combine_backward)

#define TRAINPLAN_KERNEL_TYPE(name) using name##_fn = decltype(&name);
TRAINPLAN_KERNEL_OPS(TRAINPLAN_KERNEL_TYPE)
TRAINPLAN_CPU_ONLY_KERNEL_OPS(TRAINPLAN_KERNEL_TYPE)
#undef TRAINPLAN_KERNEL_TYPE

struct kernel_ops {
  const char* backend = "";  // "cpu", "cuda"
  void* (*alloc)(std::size_t bytes) = nullptr;  // zero-filled
  void (*release)(void* ptr) = nullptr;
  void (*upload)(void* dst, const void* host_src, std::size_t bytes) = nullptr;
  void (*download)(void* host_dst, const void* src, std::size_t bytes) = nullptr;
  void (*synchronize)() = nullptr;
  std::uint64_t (*device_used_bytes)() = nullptr;  // memory in use on the device, all of it (0 on the CPU)

#define TRAINPLAN_KERNEL_MEMBER(name) name##_fn name = nullptr;
  TRAINPLAN_KERNEL_OPS(TRAINPLAN_KERNEL_MEMBER)
  TRAINPLAN_CPU_ONLY_KERNEL_OPS(TRAINPLAN_KERNEL_MEMBER)
#undef TRAINPLAN_KERNEL_MEMBER
};

const kernel_ops& cpu_kernel_ops();

}  // namespace trainplan::kernels
