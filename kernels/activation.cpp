// The CPU references of the MLP activations (activation.hpp): GELU's tanh form and SiLU with their
// derivatives written out, and the GELU and SwiGLU passes over a buffer, in fp32 and stored in its dtype.
#include "kernels/activation.hpp"

#include <cmath>

namespace trainplan::kernels {
namespace {
constexpr float sqrt_2_over_pi = 0.7978845608028654f;
constexpr float gelu_cubic = 0.044715f;
}  // namespace

float gelu(float x) {
  return 0.5f * x * (1.0f + std::tanh(sqrt_2_over_pi * (x + gelu_cubic * x * x * x)));
}

float gelu_derivative(float x) {
  const float u = sqrt_2_over_pi * (x + gelu_cubic * x * x * x);
  const float t = std::tanh(u);
  const float du = sqrt_2_over_pi * (1.0f + 3.0f * gelu_cubic * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

float silu_derivative(float x) {
  const float s = 1.0f / (1.0f + std::exp(-x));
  return s * (1.0f + x * (1.0f - s));
}

void gelu_forward(const view& x, const view& y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y.set(i, gelu(x.get(i)));
}

void gelu_backward(const view& x, const view& dy, const view& dx, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dx.set(i, dy.get(i) * gelu_derivative(x.get(i)));
}

void swiglu_forward(const view& gate, const view& up, const view& y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y.set(i, silu(gate.get(i)) * up.get(i));
}

void swiglu_backward(const view& gate, const view& up, const view& dy, const view& d_gate, const view& d_up,
                     std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const float g = gate.get(i), u = up.get(i), d = dy.get(i);
    d_gate.set(i, d * u * silu_derivative(g));
    d_up.set(i, d * silu(g));
  }
}

}  // namespace trainplan::kernels
