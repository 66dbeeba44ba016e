#pragma once
// LayerNorm (Ba et al. 2016; GPT) and RMSNorm (Zhang & Sennrich 2019; Llama) over the last dim of
// (rows, width). Mean and inverse std are not saved: the backward recomputes them from the input,
// which is why the planner's inventory has no per-row statistics.
#include <cstddef>

#include "kernels/view.hpp"

namespace trainplan::kernels {

constexpr float norm_epsilon = 1e-5f;

// y = (x - mean) * rstd * weight + bias    (bias may be null: RMSNorm-style callers use rms_norm)
void layer_norm_forward(const view& x, const view& weight, const view& bias, const view& y, std::size_t rows,
                        std::size_t width);
// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dy * weight; added into dx.
// The weight and bias gradients are summed over rows in fp32 `partials` (P, 2 * width): row p holds a
// group of rows' sums of d_weight then d_bias (the GPU gives each thread block one; the CPU uses row 0),
// and the rows' total is added to the stored gradients once. P = partials.size / (2 * width) >= 1.
void layer_norm_backward(const view& x, const view& weight, const view& dy, const view& dx, const view& d_weight,
                         const view& d_bias, const view& partials, std::size_t rows, std::size_t width);

// y = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps)
void rms_norm_forward(const view& x, const view& weight, const view& y, std::size_t rows, std::size_t width);

// The residual add and the next norm in one pass (llm.c's fused residual + LayerNorm): sum = residual +
// dropout(sum) (sum holds a sub-block's output on entry; mask may be null), stored rounded, then
// out = norm(sum) from the stored values: exactly residual_dropout then the norm, one read of `sum` fewer.
// A null `bias` means RMSNorm, otherwise LayerNorm.
void residual_norm_forward(const view& residual, const view* mask, float keep_scale, const view& sum, const view& weight,
                           const view* bias, const view& out, std::size_t rows, std::size_t width);
// dx = rstd * (dxhat - xhat * mean(dxhat * xhat)); added into dx. partials: (P, width) fp32, as above.
void rms_norm_backward(const view& x, const view& weight, const view& dy, const view& dx, const view& d_weight,
                       const view& partials, std::size_t rows, std::size_t width);

}  // namespace trainplan::kernels
