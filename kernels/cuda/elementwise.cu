// The pointwise ops of kernels/elementwise.hpp on the GPU, typed and vectorised. Approach: llm.c's Packed128
// (llmc/cuda_utils.cuh, github.com/karpathy/llm.c): each kernel is a template on its operands' element types,
// picked once on the host from the views' dtypes, and moves 8 elements per thread per step in 128-bit loads
// and stores when every pointer is aligned for it; the tail (n % 8) and misaligned calls go one element at a
// time (common.cuh: pointwise_kernel, launch_pointwise). The formulas are those of the CPU references
// (kernels/elementwise.cpp), in the same order of float operations, with the same rounding on store.
// Typed instantiations: residual_dropout and dropout_apply with both value operands of one dtype (fp32, bf16,
// fp16) and a u8 mask or none; convert and accumulate_and_clear for every pair of fp32, bf16, fp16; fill for
// those three. Any other dtype mix runs the same op over dview operands (a dtype switch per element).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.hpp"

namespace trainplan::kernels::cuda {
namespace {

// y = residual + dropout(y)
template <class Residual, class Mask, class Y>
struct residual_dropout_op {
  Residual residual;
  Mask mask;
  float keep_scale;
  Y y;
  template <int N>
  __device__ void apply(std::size_t i) const {
    float v[N], r[N];
    load_floats<N>(y, i, v);
    if constexpr (!std::is_same_v<Mask, no_operand>) {
      float keep[N];
      load_floats<N>(mask, i, keep);
#pragma unroll
      for (int k = 0; k < N; ++k) v[k] = keep[k] != 0.0f ? v[k] * keep_scale : 0.0f;
    }
    load_floats<N>(residual, i, r);
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = r[k] + v[k];
    store_floats<N>(y, i, v);
  }
};

// out = dropout(in); out may be in (every load of a step comes before its store).
template <class In, class Mask, class Out>
struct dropout_apply_op {
  In in;
  Mask mask;
  float keep_scale;
  Out out;
  template <int N>
  __device__ void apply(std::size_t i) const {
    float v[N];
    load_floats<N>(in, i, v);
    if constexpr (!std::is_same_v<Mask, no_operand>) {
      float keep[N];
      load_floats<N>(mask, i, keep);
#pragma unroll
      for (int k = 0; k < N; ++k) v[k] = keep[k] != 0.0f ? v[k] * keep_scale : 0.0f;
    }
    store_floats<N>(out, i, v);
  }
};

template <class In, class Out>
struct convert_op {
  In in;
  Out out;
  template <int N>
  __device__ void apply(std::size_t i) const {
    float v[N];
    load_floats<N>(in, i, v);
    store_floats<N>(out, i, v);
  }
};

template <class Out>
struct fill_op {
  Out out;
  float value;
  template <int N>
  __device__ void apply(std::size_t i) const {
    float v[N];
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = value;
    store_floats<N>(out, i, v);
  }
};

// dst += src, then src = 0 (in that order, as the reference: were dst src, it ends 0).
template <class Dst, class Src>
struct accumulate_and_clear_op {
  Dst dst;
  Src src;
  template <int N>
  __device__ void apply(std::size_t i) const {
    float d[N], s[N], zero[N];
    load_floats<N>(dst, i, d);
    load_floats<N>(src, i, s);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      d[k] = d[k] + s[k];
      zero[k] = 0.0f;
    }
    store_floats<N>(dst, i, d);
    store_floats<N>(src, i, zero);
  }
};

// The ops of the form out = f(in, dropout mask), members {in, mask, keep_scale, out}: typed and vectorised
// when both value operands share one dtype and the mask is u8 or absent, over dview operands otherwise.
template <template <class, class, class> class Op>
void launch_masked(const view& in, const view* mask, float keep_scale, const view& out, std::size_t n) {
  if (n == 0) return;
  const bool typed = with_float_type(out.type, [&](auto out_tag) {
    using T = typename std::decay_t<decltype(out_tag)>::type;
    return with_float_type(in.type, [&](auto in_tag) {
      if constexpr (!std::is_same_v<typename std::decay_t<decltype(in_tag)>::type, T>) {
        return false;
      } else {
        return with_mask_type(mask, [&](auto m_tag) {
          using M = typename std::decay_t<decltype(m_tag)>::type;
          const T* x = static_cast<const T*>(in.data);
          const input_operand_t<M> m = input_operand<M>(mask ? mask->data : nullptr);
          T* y = static_cast<T*>(out.data);
          launch_pointwise(Op<const T*, input_operand_t<M>, T*>{x, m, keep_scale, y}, n, all_pack_aligned(x, m, y));
          return true;
        });
      }
    });
  });
  if (typed) return;
  if (mask) launch_pointwise_scalar(Op<dview, dview, dview>{device(in), device(*mask), keep_scale, device(out)}, n);
  else launch_pointwise_scalar(Op<dview, no_operand, dview>{device(in), {}, keep_scale, device(out)}, n);
}

}  // namespace

void residual_dropout(const view& residual, const view* mask, float keep_scale, const view& y, std::size_t n) {
  launch_masked<residual_dropout_op>(residual, mask, keep_scale, y, n);
}

void dropout_apply(const view& in, const view* mask, float keep_scale, const view& out, std::size_t n) {
  launch_masked<dropout_apply_op>(in, mask, keep_scale, out, n);
}

void convert(const view& in, const view& out, std::size_t n) {
  if (n == 0) return;
  const bool typed = with_float_type(in.type, [&](auto in_tag) {
    using I = typename decltype(in_tag)::type;
    return with_float_type(out.type, [&](auto out_tag) {
      using O = typename decltype(out_tag)::type;
      const convert_op<const I*, O*> op{static_cast<const I*>(in.data), static_cast<O*>(out.data)};
      launch_pointwise(op, n, all_pack_aligned(op.in, op.out));
      return true;
    });
  });
  if (!typed) launch_pointwise_scalar(convert_op<dview, dview>{device(in), device(out)}, n);
}

void fill(const view& out, float value, std::size_t n) {
  if (n == 0) return;
  const bool typed = with_float_type(out.type, [&](auto out_tag) {
    using O = typename decltype(out_tag)::type;
    const fill_op<O*> op{static_cast<O*>(out.data), value};
    launch_pointwise(op, n, all_pack_aligned(op.out));
    return true;
  });
  if (!typed) launch_pointwise_scalar(fill_op<dview>{device(out), value}, n);
}

void accumulate_and_clear(const view& dst, const view& src, std::size_t n) {
  if (n == 0) return;
  const bool typed = with_float_type(dst.type, [&](auto dst_tag) {
    using D = typename decltype(dst_tag)::type;
    return with_float_type(src.type, [&](auto src_tag) {
      using S = typename decltype(src_tag)::type;
      const accumulate_and_clear_op<D*, S*> op{static_cast<D*>(dst.data), static_cast<S*>(src.data)};
      launch_pointwise(op, n, all_pack_aligned(op.dst, op.src));
      return true;
    });
  });
  if (!typed) launch_pointwise_scalar(accumulate_and_clear_op<dview, dview>{device(dst), device(src)}, n);
}

}  // namespace trainplan::kernels::cuda
