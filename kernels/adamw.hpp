#pragma once
// AdamW (Loshchilov & Hutter 2019) with PyTorch's update order: decay, then the bias-corrected step.
#include <cstddef>

#include "kernels/view.hpp"

namespace trainplan::kernels {

struct adamw_config {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.01f;
};

// params (the master copy, or the weights when there is none) are updated in place from grads, scaled by
// grad_scale first (1/loss scale). When low_precision_copy has data, it receives the rounded new params.
void adamw_step(const adamw_config& cfg, int step, const view& params, const view& grads, float grad_scale,
                const view& m, const view& v, const view& low_precision_copy, std::size_t n);

// True when any gradient is inf or NaN (the dynamic loss scaler's overflow check). `flag` (one i32) is
// cleared, raised by the GPU's threads, and read back by the host.
bool has_non_finite(const view& grads, const view& flag, std::size_t n);

}  // namespace trainplan::kernels
