// Pointwise kernels: GELU (tanh), SwiGLU, and dropout masks from the same hash as the CPU.
// GELU and SwiGLU are typed and vectorised after llm.c's Packed128 (llmc/cuda_utils.cuh,
// github.com/karpathy/llm.c): each is a template on its element type, picked once on the host from the views'
// dtypes, and moves 8 elements per thread per step in 128-bit loads and stores when every pointer is aligned
// for it; the tail (n % 8) and misaligned calls go one element at a time (common.cuh: pointwise_kernel). The
// formulas are the previous kernels', with the same rounding on store; the CPU reference's float operations
// are associated differently in places (GELU's derivative, SiLU as g * (1 / (1 + e))), a few ulps apart.
// Typed when all value operands share one dtype (fp32, bf16, fp16); other mixes run the same op over dview
// operands (a dtype switch per element).
#include <initializer_list>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.hpp"

namespace trainplan::kernels::cuda {
namespace {

constexpr float sqrt_2_over_pi = 0.7978845608028654f;
constexpr float gelu_cubic = 0.044715f;

__device__ float gelu(float x) { return 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * (x + gelu_cubic * x * x * x))); }
__device__ float gelu_derivative(float x) {
  const float t = tanhf(sqrt_2_over_pi * (x + gelu_cubic * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * sqrt_2_over_pi * (1.0f + 3.0f * gelu_cubic * x * x);
}
__device__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// Each op loads all its inputs before it stores, so an output may alias an input (gelu_backward's dx is its
// dy; the harness's swiglu_backward writes d_gate over dy).
template <class X, class Y>
struct gelu_forward_op {
  X x;
  Y y;
  template <int N>
  __device__ void apply(std::size_t i) const {
    float v[N];
    load_floats<N>(x, i, v);
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = gelu(v[k]);
    store_floats<N>(y, i, v);
  }
};

template <class X, class DY, class DX>
struct gelu_backward_op {
  X x;
  DY dy;
  DX dx;
  template <int N>
  __device__ void apply(std::size_t i) const {
    float xv[N], d[N];
    load_floats<N>(x, i, xv);
    load_floats<N>(dy, i, d);
#pragma unroll
    for (int k = 0; k < N; ++k) d[k] = d[k] * gelu_derivative(xv[k]);
    store_floats<N>(dx, i, d);
  }
};

template <class Gate, class Up, class Y>
struct swiglu_forward_op {
  Gate gate;
  Up up;
  Y y;
  template <int N>
  __device__ void apply(std::size_t i) const {
    float g[N], u[N];
    load_floats<N>(gate, i, g);
    load_floats<N>(up, i, u);
#pragma unroll
    for (int k = 0; k < N; ++k) g[k] = g[k] * sigmoid(g[k]) * u[k];
    store_floats<N>(y, i, g);
  }
};

template <class Gate, class Up, class DY, class DGate, class DUp>
struct swiglu_backward_op {
  Gate gate;
  Up up;
  DY dy;
  DGate d_gate;
  DUp d_up;
  template <int N>
  __device__ void apply(std::size_t i) const {
    float g[N], u[N], d[N], dg[N], du[N];
    load_floats<N>(gate, i, g);
    load_floats<N>(up, i, u);
    load_floats<N>(dy, i, d);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float s = sigmoid(g[k]);
      dg[k] = d[k] * u[k] * s * (1.0f + g[k] * (1.0f - s));
      du[k] = d[k] * g[k] * s;
    }
    store_floats<N>(d_gate, i, dg);
    store_floats<N>(d_up, i, du);
  }
};

// Typed when every value operand has one dtype (fp32, bf16 or fp16), as the harness calls them; true if launched.
template <class F>
bool with_one_float_type(std::initializer_list<dtype> types, F&& f) {
  const dtype first = *types.begin();
  for (dtype t : types)
    if (t != first) return false;
  return with_float_type(first, f);
}

__global__ void dropout_mask_kernel(std::uint64_t seed, std::uint64_t site, float p, dview mask, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) mask.set(i, dropout_keep(seed, site, i, p) ? 1.0f : 0.0f);
}

}  // namespace

void gelu_forward(const view& x, const view& y, std::size_t n) {
  if (n == 0) return;
  const bool typed = with_one_float_type({x.type, y.type}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const gelu_forward_op<const T*, T*> op{static_cast<const T*>(x.data), static_cast<T*>(y.data)};
    launch_pointwise(op, n, all_pack_aligned(op.x, op.y));
    return true;
  });
  if (!typed) launch_pointwise_scalar(gelu_forward_op<dview, dview>{device(x), device(y)}, n);
}
void gelu_backward(const view& x, const view& dy, const view& dx, std::size_t n) {
  if (n == 0) return;
  const bool typed = with_one_float_type({x.type, dy.type, dx.type}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const gelu_backward_op<const T*, const T*, T*> op{static_cast<const T*>(x.data), static_cast<const T*>(dy.data),
                                                      static_cast<T*>(dx.data)};
    launch_pointwise(op, n, all_pack_aligned(op.x, op.dy, op.dx));
    return true;
  });
  if (!typed) launch_pointwise_scalar(gelu_backward_op<dview, dview, dview>{device(x), device(dy), device(dx)}, n);
}
void swiglu_forward(const view& gate, const view& up, const view& y, std::size_t n) {
  if (n == 0) return;
  const bool typed = with_one_float_type({gate.type, up.type, y.type}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const swiglu_forward_op<const T*, const T*, T*> op{static_cast<const T*>(gate.data), static_cast<const T*>(up.data),
                                                       static_cast<T*>(y.data)};
    launch_pointwise(op, n, all_pack_aligned(op.gate, op.up, op.y));
    return true;
  });
  if (!typed) launch_pointwise_scalar(swiglu_forward_op<dview, dview, dview>{device(gate), device(up), device(y)}, n);
}
void swiglu_backward(const view& gate, const view& up, const view& dy, const view& d_gate, const view& d_up, std::size_t n) {
  if (n == 0) return;
  const bool typed = with_one_float_type({gate.type, up.type, dy.type, d_gate.type, d_up.type}, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const swiglu_backward_op<const T*, const T*, const T*, T*, T*> op{
        static_cast<const T*>(gate.data), static_cast<const T*>(up.data), static_cast<const T*>(dy.data),
        static_cast<T*>(d_gate.data), static_cast<T*>(d_up.data)};
    launch_pointwise(op, n, all_pack_aligned(op.gate, op.up, op.dy, op.d_gate, op.d_up));
    return true;
  });
  if (!typed)
    launch_pointwise_scalar(swiglu_backward_op<dview, dview, dview, dview, dview>{device(gate), device(up), device(dy),
                                                                                  device(d_gate), device(d_up)},
                            n);
}
void dropout_mask(std::uint64_t seed, std::uint64_t site, float p, const view& mask, std::size_t n) {
  if (n == 0) return;
  dropout_mask_kernel<<<blocks_for(n, 256), 256>>>(seed, site, p, device(mask), n);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

}  // namespace trainplan::kernels::cuda
