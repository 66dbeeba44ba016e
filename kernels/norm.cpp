// The CPU references of LayerNorm and RMSNorm (norm.hpp), forward and backward, the backward recomputing each
// row's mean and inverse std from the input; and the residual add fused before a norm.
#include "kernels/norm.hpp"

#include "kernels/elementwise.hpp"

#include <cmath>
#include <stdexcept>
#include <vector>

namespace trainplan::kernels {
namespace {

struct row_stats {
  float mean = 0, rstd = 0;
};

row_stats stats(const view& x, std::size_t r, std::size_t width, bool center) {
  double sum = 0, sq = 0;
  for (std::size_t i = 0; i < width; ++i) sum += x.get(r * width + i);
  const double mean = center ? sum / width : 0.0;
  for (std::size_t i = 0; i < width; ++i) {
    const double d = x.get(r * width + i) - mean;
    sq += d * d;
  }
  return {static_cast<float>(mean), static_cast<float>(1.0 / std::sqrt(sq / width + norm_epsilon))};
}

void norm_backward(const view& x, const view& weight, const view& dy, const view& dx, const view& d_weight,
                   const view* d_bias, const view& partials, std::size_t rows, std::size_t width, bool center) {
  const std::size_t sums = d_bias ? 2 * width : width;  // d_weight's, then d_bias's, in partial row 0
  if (partials.size < sums) throw std::invalid_argument("norm backward: the partial sums need at least one row");
  for (std::size_t i = 0; i < sums; ++i) partials.set(i, 0.0f);
  const view dw = partials.slice(0, width), db = d_bias ? partials.slice(width, width) : view{};
  std::vector<float> xhat(width), dxhat(width);
  for (std::size_t r = 0; r < rows; ++r) {
    const row_stats s = stats(x, r, width, center);
    double mean_dxhat = 0, mean_dxhat_xhat = 0;
    for (std::size_t i = 0; i < width; ++i) {
      const float g = dy.get(r * width + i);
      xhat[i] = (x.get(r * width + i) - s.mean) * s.rstd;
      dxhat[i] = g * weight.get(i);
      dw.add(i, g * xhat[i]);
      if (d_bias) db.add(i, g);
      mean_dxhat += dxhat[i];
      mean_dxhat_xhat += dxhat[i] * xhat[i];
    }
    mean_dxhat = center ? mean_dxhat / width : 0.0;
    mean_dxhat_xhat /= width;
    for (std::size_t i = 0; i < width; ++i)
      dx.add(r * width + i, s.rstd * static_cast<float>(dxhat[i] - mean_dxhat - xhat[i] * mean_dxhat_xhat));
  }
  for (std::size_t i = 0; i < width; ++i) {
    d_weight.add(i, dw.get(i));
    if (d_bias) d_bias->add(i, db.get(i));
  }
}

}  // namespace

void layer_norm_forward(const view& x, const view& weight, const view& bias, const view& y, std::size_t rows,
                        std::size_t width) {
  for (std::size_t r = 0; r < rows; ++r) {
    const row_stats s = stats(x, r, width, true);
    for (std::size_t i = 0; i < width; ++i)
      y.set(r * width + i, (x.get(r * width + i) - s.mean) * s.rstd * weight.get(i) + bias.get(i));
  }
}

void layer_norm_backward(const view& x, const view& weight, const view& dy, const view& dx, const view& d_weight,
                         const view& d_bias, const view& partials, std::size_t rows, std::size_t width) {
  norm_backward(x, weight, dy, dx, d_weight, &d_bias, partials, rows, width, true);
}

void residual_norm_forward(const view& residual, const view* mask, float keep_scale, const view& sum, const view& weight,
                           const view* bias, const view& out, std::size_t rows, std::size_t width) {
  residual_dropout(residual, mask, keep_scale, sum, rows * width);
  if (bias) layer_norm_forward(sum, weight, *bias, out, rows, width);
  else rms_norm_forward(sum, weight, out, rows, width);
}

void rms_norm_forward(const view& x, const view& weight, const view& y, std::size_t rows, std::size_t width) {
  for (std::size_t r = 0; r < rows; ++r) {
    const row_stats s = stats(x, r, width, false);
    for (std::size_t i = 0; i < width; ++i) y.set(r * width + i, x.get(r * width + i) * s.rstd * weight.get(i));
  }
}

void rms_norm_backward(const view& x, const view& weight, const view& dy, const view& dx, const view& d_weight,
                       const view& partials, std::size_t rows, std::size_t width) {
  norm_backward(x, weight, dy, dx, d_weight, nullptr, partials, rows, width, false);
}

}  // namespace trainplan::kernels
