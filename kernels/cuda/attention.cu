// Causal GQA attention on the GPU: eager (materialized probabilities) and flash-style (online softmax,
// only the fp32 log-sum-exp kept), and RoPE. These are correctness-first kernels (one thread per output
// element or per row, no tensor cores), to be checked against kernels/attention_*.cpp before the tiled,
// tensor-core versions the benchmark needs replace them; layouts and dropout indices match the CPU's.
#include <stdexcept>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.hpp"

namespace trainplan::kernels::cuda {
namespace {

constexpr std::size_t max_head_dim = 256;  // per-thread accumulators of the flash kernels

struct layout {
  std::size_t batch, seq, heads, kv_heads, d;
  __device__ std::size_t qkv_width() const { return (heads + 2 * kv_heads) * d; }
  __device__ std::size_t q(std::size_t b, std::size_t t, std::size_t h, std::size_t e) const {
    return (b * seq + t) * qkv_width() + h * d + e;
  }
  __device__ std::size_t k(std::size_t b, std::size_t t, std::size_t kvh, std::size_t e) const {
    return (b * seq + t) * qkv_width() + (heads + kvh) * d + e;
  }
  __device__ std::size_t v(std::size_t b, std::size_t t, std::size_t kvh, std::size_t e) const {
    return (b * seq + t) * qkv_width() + (heads + kv_heads + kvh) * d + e;
  }
  __device__ std::size_t o(std::size_t b, std::size_t t, std::size_t h, std::size_t e) const {
    return (b * seq + t) * heads * d + h * d + e;
  }
  __device__ std::size_t p(std::size_t b, std::size_t h, std::size_t i, std::size_t j) const {
    return ((b * heads + h) * seq + i) * seq + j;
  }
  __device__ std::size_t row(std::size_t b, std::size_t h, std::size_t i) const { return (b * heads + h) * seq + i; }
  __device__ std::size_t group() const { return heads / kv_heads; }
};

layout make_layout(const attention_shape& sh) {
  if (sh.head_dim > max_head_dim) throw std::runtime_error("attention: head_dim above 256 is not supported");
  return {sh.batch, sh.seq, sh.heads, sh.kv_heads, sh.head_dim};
}

__device__ float score(const layout& L, dview qkv, std::size_t b, std::size_t h, std::size_t i, std::size_t j, float scale) {
  float dot = 0;
  for (std::size_t e = 0; e < L.d; ++e) dot += qkv.get(L.q(b, i, h, e)) * qkv.get(L.k(b, j, h / L.group(), e));
  return dot * scale;
}

// ---- eager -------------------------------------------------------------------------------------------

__global__ void eager_softmax_kernel(layout L, dview qkv, dview softmax, dview mask, dview dropped, attention_dropout drop,
                                     float scale) {
  const std::size_t i = blockIdx.x % L.seq, h = (blockIdx.x / L.seq) % L.heads, b = blockIdx.x / (L.seq * L.heads);
  float m = -INFINITY;
  for (std::size_t j = threadIdx.x; j <= i; j += blockDim.x) m = fmaxf(m, score(L, qkv, b, h, i, j, scale));
  m = block_max(m);
  float s = 0;
  for (std::size_t j = threadIdx.x; j <= i; j += blockDim.x) s += expf(score(L, qkv, b, h, i, j, scale) - m);
  s = block_sum(s);
  const float keep_scale = 1.0f / (1.0f - drop.p);
  for (std::size_t j = threadIdx.x; j < L.seq; j += blockDim.x) {
    const std::size_t at = L.p(b, h, i, j);
    softmax.set(at, j <= i ? expf(score(L, qkv, b, h, i, j, scale) - m) / s : 0.0f);
    if (drop.p > 0) {
      const bool keep = dropout_keep(drop.seed, drop.site, at, drop.p);
      mask.set(at, keep ? 1.0f : 0.0f);
      dropped.set(at, keep ? softmax.get(at) * keep_scale : 0.0f);
    }
  }
}

__global__ void eager_values_kernel(layout L, dview qkv, dview probs, dview out, std::size_t n) {
  const std::size_t x = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (x >= n) return;
  const std::size_t e = x % L.d, h = (x / L.d) % L.heads, i = (x / (L.d * L.heads)) % L.seq, b = x / (L.d * L.heads * L.seq);
  float acc = 0;
  for (std::size_t j = 0; j <= i; ++j) acc += probs.get(L.p(b, h, i, j)) * qkv.get(L.v(b, j, h / L.group(), e));
  out.set(L.o(b, i, h, e), acc);
}

// d(probs)_ij = d_out_i . v_j, through the dropout mask; one thread per (b, h, i, j).
__global__ void eager_dprobs_kernel(layout L, dview qkv, dview mask, attention_dropout drop, dview d_out, dview d_scores,
                                    std::size_t n) {
  const std::size_t x = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (x >= n) return;
  const std::size_t j = x % L.seq, i = (x / L.seq) % L.seq, h = (x / (L.seq * L.seq)) % L.heads,
                    b = x / (L.seq * L.seq * L.heads);
  float dp = 0;
  if (j <= i) {
    for (std::size_t e = 0; e < L.d; ++e) dp += d_out.get(L.o(b, i, h, e)) * qkv.get(L.v(b, j, h / L.group(), e));
    if (drop.p > 0) dp = mask.get(x) != 0.0f ? dp / (1.0f - drop.p) : 0.0f;
  }
  d_scores.set(x, dp);
}

// Softmax backward per row, in place: dS = P (dP - rowsum(P dP)).
__global__ void eager_softmax_backward_kernel(layout L, dview softmax, dview d_scores) {
  const std::size_t i = blockIdx.x % L.seq, h = (blockIdx.x / L.seq) % L.heads, b = blockIdx.x / (L.seq * L.heads);
  float dot = 0;
  for (std::size_t j = threadIdx.x; j <= i; j += blockDim.x) dot += softmax.get(L.p(b, h, i, j)) * d_scores.get(L.p(b, h, i, j));
  dot = block_sum(dot);
  for (std::size_t j = threadIdx.x; j <= i; j += blockDim.x) {
    const std::size_t at = L.p(b, h, i, j);
    d_scores.set(at, softmax.get(at) * (d_scores.get(at) - dot));
  }
}

__global__ void eager_dq_kernel(layout L, dview qkv, dview d_scores, dview d_qkv, float scale, std::size_t n) {
  const std::size_t x = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (x >= n) return;
  const std::size_t e = x % L.d, h = (x / L.d) % L.heads, i = (x / (L.d * L.heads)) % L.seq, b = x / (L.d * L.heads * L.seq);
  float acc = 0;
  for (std::size_t j = 0; j <= i; ++j) acc += d_scores.get(L.p(b, h, i, j)) * qkv.get(L.k(b, j, h / L.group(), e));
  d_qkv.set(L.q(b, i, h, e), acc * scale);
}

// dK and dV of key/value head kvh at position j, summed over its query heads and the rows i >= j.
__global__ void eager_dkv_kernel(layout L, dview qkv, dview probs, dview d_out, dview d_scores, dview d_qkv, float scale,
                                 std::size_t n) {
  const std::size_t x = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (x >= n) return;
  const std::size_t e = x % L.d, kvh = (x / L.d) % L.kv_heads, j = (x / (L.d * L.kv_heads)) % L.seq,
                    b = x / (L.d * L.kv_heads * L.seq);
  float dk = 0, dv = 0;
  for (std::size_t h = kvh * L.group(); h < (kvh + 1) * L.group(); ++h)
    for (std::size_t i = j; i < L.seq; ++i) {
      dk += d_scores.get(L.p(b, h, i, j)) * qkv.get(L.q(b, i, h, e));
      dv += probs.get(L.p(b, h, i, j)) * d_out.get(L.o(b, i, h, e));
    }
  d_qkv.set(L.k(b, j, kvh, e), dk * scale);
  d_qkv.set(L.v(b, j, kvh, e), dv);
}

// ---- flash -------------------------------------------------------------------------------------------

__global__ void flash_forward_kernel(layout L, dview qkv, attention_dropout drop, dview out, dview lse, float scale,
                                     std::size_t rows) {
  const std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const std::size_t i = r % L.seq, h = (r / L.seq) % L.heads, b = r / (L.seq * L.heads);
  float acc[max_head_dim];
  for (std::size_t e = 0; e < L.d; ++e) acc[e] = 0;
  float m = -INFINITY, s = 0;
  const float keep_scale = 1.0f / (1.0f - drop.p);
  for (std::size_t j = 0; j <= i; ++j) {
    const float x = score(L, qkv, b, h, i, j, scale);
    const float m_new = fmaxf(m, x), correction = expf(m - m_new), p = expf(x - m_new);
    s = s * correction + p;
    const float pd = dropout_keep(drop.seed, drop.site, L.p(b, h, i, j), drop.p) ? (drop.p > 0 ? p * keep_scale : p) : 0.0f;
    for (std::size_t e = 0; e < L.d; ++e) acc[e] = acc[e] * correction + pd * qkv.get(L.v(b, j, h / L.group(), e));
    m = m_new;
  }
  for (std::size_t e = 0; e < L.d; ++e) out.set(L.o(b, i, h, e), acc[e] / s);
  lse.set(L.row(b, h, i), m + logf(s));
}

__global__ void flash_delta_kernel(layout L, dview out, dview d_out, dview delta, std::size_t rows) {
  const std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const std::size_t i = r % L.seq, h = (r / L.seq) % L.heads, b = r / (L.seq * L.heads);
  float dot = 0;
  for (std::size_t e = 0; e < L.d; ++e) dot += d_out.get(L.o(b, i, h, e)) * out.get(L.o(b, i, h, e));
  delta.set(r, dot);
}

// dS_ij recomputed from lse and delta (FlashAttention-2, Alg. 2); also returns the dropped probability.
__device__ float flash_ds(const layout& L, dview qkv, dview lse, dview delta, dview d_out, const attention_dropout& drop,
                          std::size_t b, std::size_t h, std::size_t i, std::size_t j, float scale, float& pd) {
  const float p = expf(score(L, qkv, b, h, i, j, scale) - lse.get(L.row(b, h, i)));
  float dpd = 0;
  for (std::size_t e = 0; e < L.d; ++e) dpd += d_out.get(L.o(b, i, h, e)) * qkv.get(L.v(b, j, h / L.group(), e));
  const bool keep = dropout_keep(drop.seed, drop.site, L.p(b, h, i, j), drop.p);
  const float keep_scale = drop.p > 0 ? 1.0f / (1.0f - drop.p) : 1.0f;
  pd = keep ? p * keep_scale : 0.0f;
  const float dp = keep ? dpd * keep_scale : 0.0f;
  return p * (dp - delta.get(L.row(b, h, i))) * scale;
}

__global__ void flash_dq_kernel(layout L, dview qkv, dview lse, dview delta, dview d_out, attention_dropout drop,
                                dview d_qkv, float scale, std::size_t rows) {
  const std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const std::size_t i = r % L.seq, h = (r / L.seq) % L.heads, b = r / (L.seq * L.heads);
  float dq[max_head_dim];
  for (std::size_t e = 0; e < L.d; ++e) dq[e] = 0;
  for (std::size_t j = 0; j <= i; ++j) {
    float pd;
    const float ds = flash_ds(L, qkv, lse, delta, d_out, drop, b, h, i, j, scale, pd);
    for (std::size_t e = 0; e < L.d; ++e) dq[e] += ds * qkv.get(L.k(b, j, h / L.group(), e));
  }
  for (std::size_t e = 0; e < L.d; ++e) d_qkv.set(L.q(b, i, h, e), dq[e]);
}

__global__ void flash_dkv_kernel(layout L, dview qkv, dview lse, dview delta, dview d_out, attention_dropout drop,
                                 dview d_qkv, float scale, std::size_t n) {
  const std::size_t x = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (x >= n) return;
  const std::size_t kvh = x % L.kv_heads, j = (x / L.kv_heads) % L.seq, b = x / (L.kv_heads * L.seq);
  float dk[max_head_dim], dv[max_head_dim];
  for (std::size_t e = 0; e < L.d; ++e) dk[e] = dv[e] = 0;
  for (std::size_t h = kvh * L.group(); h < (kvh + 1) * L.group(); ++h)
    for (std::size_t i = j; i < L.seq; ++i) {
      float pd;
      const float ds = flash_ds(L, qkv, lse, delta, d_out, drop, b, h, i, j, scale, pd);
      for (std::size_t e = 0; e < L.d; ++e) {
        dk[e] += ds * qkv.get(L.q(b, i, h, e));
        dv[e] += pd * d_out.get(L.o(b, i, h, e));
      }
    }
  for (std::size_t e = 0; e < L.d; ++e) {
    d_qkv.set(L.k(b, j, kvh, e), dk[e]);
    d_qkv.set(L.v(b, j, kvh, e), dv[e]);
  }
}

// ---- rope --------------------------------------------------------------------------------------------

__global__ void rope_kernel(layout L, dview qkv, bool inverse, std::size_t n) {
  const std::size_t x = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (x >= n) return;
  const std::size_t half = L.d / 2, e = x % half, slot = (x / half) % (L.heads + L.kv_heads),
                    t = (x / (half * (L.heads + L.kv_heads))) % L.seq, b = x / (half * (L.heads + L.kv_heads) * L.seq);
  const double angle = static_cast<double>(t) * pow(10000.0, -2.0 * static_cast<double>(e) / static_cast<double>(L.d));
  const float c = static_cast<float>(cos(angle)), sn = static_cast<float>(inverse ? -sin(angle) : sin(angle));
  const std::size_t base = (b * L.seq + t) * L.qkv_width() + slot * L.d;
  const float x1 = qkv.get(base + e), x2 = qkv.get(base + e + half);
  qkv.set(base + e, x1 * c - x2 * sn);
  qkv.set(base + e + half, x2 * c + x1 * sn);
}

float scale_of(const attention_shape& sh) { return 1.0f / std::sqrt(static_cast<float>(sh.head_dim)); }

}  // namespace

void eager_attention_forward(const attention_shape& sh, const view& qkv, const view& softmax, const view& mask,
                             const view& dropped, const attention_dropout& drop, const view& out) {
  const layout L = make_layout(sh);
  eager_softmax_kernel<<<static_cast<unsigned>(sh.batch * sh.heads * sh.seq), 128>>>(
      L, device(qkv), device(softmax), device(mask), device(dropped), drop, scale_of(sh));
  TRAINPLAN_CUDA_LAUNCH_CHECK();
  const std::size_t n = sh.batch * sh.seq * sh.heads * sh.head_dim;
  eager_values_kernel<<<blocks_for(n, 128), 128>>>(L, device(qkv), device(drop.p > 0 ? dropped : softmax), device(out), n);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

void eager_attention_backward(const attention_shape& sh, const view& qkv, const view& softmax, const view& mask,
                              const view& dropped, const attention_dropout& drop, const view& d_out, const view& d_scores,
                              const view& d_qkv) {
  const layout L = make_layout(sh);
  const float scale = scale_of(sh);
  const std::size_t probs = sh.batch * sh.heads * sh.seq * sh.seq;
  eager_dprobs_kernel<<<blocks_for(probs, 128), 128>>>(L, device(qkv), device(mask), drop, device(d_out), device(d_scores), probs);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
  // dV needs the (dropped) probabilities and dP; dS replaces dP in place below, so dV is computed from
  // the probabilities and d_out directly in eager_dkv_kernel.
  eager_softmax_backward_kernel<<<static_cast<unsigned>(sh.batch * sh.heads * sh.seq), 128>>>(L, device(softmax), device(d_scores));
  TRAINPLAN_CUDA_LAUNCH_CHECK();
  const std::size_t nq = sh.batch * sh.seq * sh.heads * sh.head_dim, nkv = sh.batch * sh.seq * sh.kv_heads * sh.head_dim;
  eager_dq_kernel<<<blocks_for(nq, 128), 128>>>(L, device(qkv), device(d_scores), device(d_qkv), scale, nq);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
  eager_dkv_kernel<<<blocks_for(nkv, 128), 128>>>(L, device(qkv), device(drop.p > 0 ? dropped : softmax), device(d_out),
                                                  device(d_scores), device(d_qkv), scale, nkv);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

void flash_attention_forward(const attention_shape& sh, const view& qkv, const attention_dropout& drop, const view& out,
                             const view& lse) {
  const layout L = make_layout(sh);
  const std::size_t rows = sh.batch * sh.heads * sh.seq;
  flash_forward_kernel<<<blocks_for(rows, 64), 64>>>(L, device(qkv), drop, device(out), device(lse), scale_of(sh), rows);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

void flash_attention_backward(const attention_shape& sh, const view& qkv, const view& out, const view& lse,
                              const attention_dropout& drop, const view& d_out, const view& delta, const view& d_qkv) {
  const layout L = make_layout(sh);
  const float scale = scale_of(sh);
  const std::size_t rows = sh.batch * sh.heads * sh.seq;
  flash_delta_kernel<<<blocks_for(rows, 128), 128>>>(L, device(out), device(d_out), device(delta), rows);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
  flash_dq_kernel<<<blocks_for(rows, 64), 64>>>(L, device(qkv), device(lse), device(delta), device(d_out), drop,
                                                device(d_qkv), scale, rows);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
  const std::size_t nkv = sh.batch * sh.seq * sh.kv_heads;
  flash_dkv_kernel<<<blocks_for(nkv, 64), 64>>>(L, device(qkv), device(lse), device(delta), device(d_out), drop,
                                                device(d_qkv), scale, nkv);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

void rope_apply(const attention_shape& sh, const view& qkv, bool inverse) {
  const layout L = make_layout(sh);
  const std::size_t n = sh.batch * sh.seq * (sh.heads + sh.kv_heads) * (sh.head_dim / 2);
  rope_kernel<<<blocks_for(n, 256), 256>>>(L, device(qkv), inverse, n);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

}  // namespace trainplan::kernels::cuda
