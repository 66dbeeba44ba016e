#include "kernels/ops_table.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

namespace trainplan::kernels {
namespace {

void* host_alloc(std::size_t bytes) {
  void* p = std::calloc(bytes == 0 ? 1 : bytes, 1);
  if (!p) throw std::bad_alloc();
  return p;
}
void host_release(void* p) { std::free(p); }
void host_copy(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
void host_synchronize() {}
std::uint64_t no_device() { return 0; }

}  // namespace

const kernel_ops& cpu_kernel_ops() {
  static const kernel_ops ops{"cpu", host_alloc, host_release, host_copy, host_copy, host_synchronize, no_device,
                              linear_forward, linear_backward_input, linear_backward_weight, layer_norm_forward,
                              layer_norm_backward, rms_norm_forward, rms_norm_backward, gelu_forward, gelu_backward,
                              swiglu_forward, swiglu_backward, dropout_mask, cross_entropy_forward_backward, adamw_step,
                              has_non_finite, embedding_forward, embedding_backward, eager_attention_forward,
                              eager_attention_backward, flash_attention_forward, flash_attention_backward, rope_apply,
                              residual_dropout, dropout_apply, convert, fill, accumulate_and_clear};
  return ops;
}

}  // namespace trainplan::kernels
