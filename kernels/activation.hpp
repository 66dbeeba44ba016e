#pragma once
// Pointwise MLP activations: GELU (tanh approximation, GPT-2's "gelu_new"; Hendrycks & Gimpel 2016) and
// SwiGLU (silu(gate) * up; Shazeer 2020, as in Llama).
#include <cstddef>

#include "kernels/view.hpp"

namespace trainplan::kernels {

float gelu(float x);
float gelu_derivative(float x);
float silu(float x);
float silu_derivative(float x);

void gelu_forward(const view& x, const view& y, std::size_t n);
// dx = dy * gelu'(x); dx may be the same buffer as dy.
void gelu_backward(const view& x, const view& dy, const view& dx, std::size_t n);

void swiglu_forward(const view& gate, const view& up, const view& y, std::size_t n);
// d_gate = dy * up * silu'(gate), d_up = dy * silu(gate)
void swiglu_backward(const view& gate, const view& up, const view& dy, const view& d_gate, const view& d_up,
                     std::size_t n);

}  // namespace trainplan::kernels
