// The CPU reference of the AdamW step (adamw.hpp): PyTorch's order (decay, then the bias-corrected update),
// in fp32 with the bias corrections in double; and the loss scaler's check for inf or NaN gradients.
#include "kernels/adamw.hpp"

#include <cmath>

namespace trainplan::kernels {

void adamw_step(const adamw_config& cfg, int step, const view& params, const view& grads, float grad_scale,
                const view& m, const view& v, const view& low_precision_copy, std::size_t n) {
  const double bias1 = 1.0 - std::pow(static_cast<double>(cfg.beta1), step);
  const double bias2 = 1.0 - std::pow(static_cast<double>(cfg.beta2), step);
  for (std::size_t i = 0; i < n; ++i) {
    const float g = grads.get(i) * grad_scale;
    const float mi = cfg.beta1 * m.get(i) + (1.0f - cfg.beta1) * g;
    const float vi = cfg.beta2 * v.get(i) + (1.0f - cfg.beta2) * g * g;
    m.set(i, mi);
    v.set(i, vi);
    float p = params.get(i) * (1.0f - cfg.lr * cfg.weight_decay);
    const double m_hat = mi / bias1, v_hat = vi / bias2;
    p -= static_cast<float>(cfg.lr * m_hat / (std::sqrt(v_hat) + cfg.eps));
    params.set(i, p);
    if (low_precision_copy.data) low_precision_copy.set(i, params.get(i));
  }
}

bool has_non_finite(const view& grads, const view& flag, std::size_t n) {
  flag.set(0, 0.0f);
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(grads.get(i))) {
      flag.set(0, 1.0f);
      break;
    }
  return flag.get_i32(0) != 0;
}

}  // namespace trainplan::kernels
