// Fused AdamW: one pass reads the gradient, updates m, v and the fp32 master copy, and writes the rounded
// low-precision weights. The loss-scale check is a reduction that flags any inf or NaN gradient.
// The update is typed and vectorised after llm.c's Packed128 (llmc/cuda_utils.cuh, github.com/karpathy/llm.c):
// a template on the element types of params, grads and the copy, picked once on the host from the views'
// dtypes, moving 8 elements per thread per step in 128-bit loads and stores when every pointer is aligned for
// it; the tail (n % 8) and misaligned calls go one element at a time (common.cuh: pointwise_kernel). Same
// formulas, in the same order of float operations, as the previous kernel.
#include <cmath>
#include <stdexcept>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.hpp"

namespace trainplan::kernels::cuda {
namespace {

// One flat buffer of n parameters. Params (the fp32 master, or the weights themselves) and the optional copy
// are read and written through their operand types; m and v are fp32. Every load of a step comes before its
// stores.
template <class Params, class Grads, class Moment, class Copy>
struct adamw_op {
  adamw_config cfg;
  float bias1, bias2, grad_scale;
  Params params;
  Grads grads;
  Moment m, v;
  Copy copy;
  template <int N>
  __device__ void apply(std::size_t i) const {
    float g[N], mv[N], vv[N], p[N];
    load_floats<N>(grads, i, g);
    load_floats<N>(m, i, mv);
    load_floats<N>(v, i, vv);
    load_floats<N>(params, i, p);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float gk = g[k] * grad_scale;
      const float mi = cfg.beta1 * mv[k] + (1.0f - cfg.beta1) * gk;
      const float vi = cfg.beta2 * vv[k] + (1.0f - cfg.beta2) * gk * gk;
      mv[k] = mi;
      vv[k] = vi;
      float pk = p[k] * (1.0f - cfg.lr * cfg.weight_decay);
      pk -= cfg.lr * (mi / bias1) / (sqrtf(vi / bias2) + cfg.eps);
      p[k] = pk;
    }
    store_floats<N>(m, i, mv);
    store_floats<N>(v, i, vv);
    store_floats<N>(params, i, p);
    if constexpr (!std::is_same_v<Copy, no_operand>) {
      stored_values<N>(params, i, p);  // the copy gets the params as stored (rounded to their dtype)
      store_floats<N>(copy, i, p);
    }
  }
};

__global__ void non_finite_kernel(dview grads, std::size_t n, int* flag) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n && !isfinite(grads.get(i))) atomicOr(flag, 1);
}

}  // namespace

void adamw_step(const adamw_config& cfg, int step, const view& params, const view& grads, float grad_scale, const view& m,
                const view& v, const view& low_precision_copy, std::size_t n) {
  const float bias1 = static_cast<float>(1.0 - std::pow(static_cast<double>(cfg.beta1), step));
  const float bias2 = static_cast<float>(1.0 - std::pow(static_cast<double>(cfg.beta2), step));
  if (n == 0) return;
  const bool has_copy = low_precision_copy.data != nullptr;
  const bool fp32_moments = (m.type == dtype::fp32 || m.type == dtype::tf32) && (v.type == dtype::fp32 || v.type == dtype::tf32);
  // Typed: params fp32 with grads and copy (or none) of fp32, bf16 or fp16; params bf16 or fp16 (no master)
  // with grads of any of the three and no copy. Anything else: dview operands.
  const bool typed = fp32_moments && with_float_type(params.type, [&](auto p_tag) {
    using P = typename decltype(p_tag)::type;
    return with_float_type(grads.type, [&](auto g_tag) {
      using G = typename decltype(g_tag)::type;
      auto launch = [&](auto c_tag) {
        using C = typename decltype(c_tag)::type;
        if constexpr (!std::is_same_v<P, float> && !std::is_same_v<C, no_operand>) {
          return false;
        } else {
          const adamw_op<P*, const G*, float*, output_operand_t<C>> op{
              cfg, bias1, bias2, grad_scale, static_cast<P*>(params.data), static_cast<const G*>(grads.data),
              static_cast<float*>(m.data), static_cast<float*>(v.data), output_operand<C>(low_precision_copy.data)};
          launch_pointwise(op, n, all_pack_aligned(op.params, op.grads, op.m, op.v, op.copy));
          return true;
        }
      };
      return has_copy ? with_float_type(low_precision_copy.type, launch) : launch(type_tag<no_operand>{});
    });
  });
  if (typed) return;
  if (has_copy)
    launch_pointwise_scalar(adamw_op<dview, dview, dview, dview>{cfg, bias1, bias2, grad_scale, device(params), device(grads),
                                                                 device(m), device(v), device(low_precision_copy)},
                            n);
  else
    launch_pointwise_scalar(adamw_op<dview, dview, dview, no_operand>{cfg, bias1, bias2, grad_scale, device(params),
                                                                      device(grads), device(m), device(v), {}},
                            n);
}

// The one read-back of an fp16 step, before its optimizer update (GradScaler reads found_inf there too).
bool has_non_finite(const view& grads, const view& flag, std::size_t n) {
  if (flag.type != dtype::i32 || flag.size < 1) throw std::invalid_argument("has_non_finite: the flag is one i32");
  if (n == 0) return false;
  int* device_flag = static_cast<int*>(flag.data);
  TRAINPLAN_CUDA_CHECK(cudaMemsetAsync(device_flag, 0, sizeof(int), 0));
  non_finite_kernel<<<blocks_for(n, 256), 256>>>(device(grads), n, device_flag);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
  int host = 0;
  copy_to_host(&host, device_flag, sizeof(int));
  return host != 0;
}

}  // namespace trainplan::kernels::cuda
