// Causal GQA attention on the GPU: eager (materialized probabilities) and RoPE; the flash kernels are in
// attention_flash.cu. Eager runs its products as cuBLAS strided-batched GEMMs over the kv heads (fp32
// accumulation; the full s x s products, the upper triangle multiplied by zeros) around one fused row
// kernel for the causal softmax (and dropout) and one for its backward, when qkv, the probabilities,
// the output and the gradients share one of fp32/bf16/fp16; otherwise the correctness-first kernels
// (one thread per output element or per row) run. Checked against kernels/attention_eager.cpp; layouts
// and dropout indices match the CPU's.
#include <initializer_list>
#include <stdexcept>

#include "kernels/cuda/attention_layout.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.hpp"

namespace trainplan::kernels::cuda {
namespace {

using namespace attention_detail;

// ---- eager -------------------------------------------------------------------------------------------

__global__ void eager_softmax_kernel(layout L, dview qkv, dview softmax, dview mask, dview dropped, attention_dropout drop,
                                     float scale) {
  const std::size_t i = blockIdx.x % L.seq, h = (blockIdx.x / L.seq) % L.heads, b = blockIdx.x / (L.seq * L.heads);
  // The scores rounded to the probabilities' dtype, as the CPU reference and the cuBLAS path store them.
  auto stored_score = [&](std::size_t j) { return rounded_as(softmax.type, score(L, qkv, b, h, i, j, scale)); };
  float m = -INFINITY;
  for (std::size_t j = threadIdx.x; j <= i; j += blockDim.x) m = fmaxf(m, stored_score(j));
  m = block_max(m);
  float s = 0;
  for (std::size_t j = threadIdx.x; j <= i; j += blockDim.x) s += expf(stored_score(j) - m);
  s = block_sum(s);
  const float keep_scale = 1.0f / (1.0f - drop.p);
  for (std::size_t j = threadIdx.x; j < L.seq; j += blockDim.x) {
    const std::size_t at = L.p(b, h, i, j);
    softmax.set(at, j <= i ? expf(stored_score(j) - m) / s : 0.0f);
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

// ---- eager through cuBLAS: strided-batched GEMMs over the kv heads, fused row kernels ---------------

// In place on one row of scores (scaled), one block per row (b, h, i) = blockIdx.x: the causal softmax
// (max and sum over j <= i in fp32, zeros above the diagonal) and, when p > 0, the mask and the dropped
// probabilities. softmax (b, a, s, s); mask and dropped of the same shape.
__global__ void eager_softmax_rows_kernel(std::size_t seq, dview softmax, dview mask, dview dropped, attention_dropout drop) {
  const std::size_t i = blockIdx.x % seq, first = static_cast<std::size_t>(blockIdx.x) * seq;  // flat index of (b, h, i, 0)
  float m = -INFINITY;
  for (std::size_t j = threadIdx.x; j <= i; j += blockDim.x) m = fmaxf(m, softmax.get(first + j));
  m = block_max(m);
  float s = 0;
  for (std::size_t j = threadIdx.x; j <= i; j += blockDim.x) s += expf(softmax.get(first + j) - m);
  s = block_sum(s);  // its barriers also order every read above before the writes below
  const float keep_scale = 1.0f / (1.0f - drop.p);
  for (std::size_t j = threadIdx.x; j < seq; j += blockDim.x) {
    const std::size_t at = first + j;
    softmax.set(at, j <= i ? expf(softmax.get(at) - m) / s : 0.0f);
    if (drop.p > 0) {
      const bool keep = dropout_keep(drop.seed, drop.site, at, drop.p);
      mask.set(at, keep ? 1.0f : 0.0f);
      dropped.set(at, keep ? softmax.get(at) * keep_scale : 0.0f);
    }
  }
}

// In place on one row of d_scores = dP (b, h, i) = blockIdx.x: through the dropout mask, then the softmax
// backward dS = P (dP~ - rowsum(P dP~)); zeros above the diagonal.
__global__ void eager_softmax_backward_rows_kernel(std::size_t seq, dview softmax, dview mask, attention_dropout drop,
                                                   dview d_scores) {
  const std::size_t i = blockIdx.x % seq, first = static_cast<std::size_t>(blockIdx.x) * seq;
  const float keep_scale = 1.0f / (1.0f - drop.p);
  float dot = 0;
  for (std::size_t j = threadIdx.x; j <= i; j += blockDim.x) {
    float dp = d_scores.get(first + j);
    if (drop.p > 0) dp = mask.get(first + j) != 0.0f ? dp * keep_scale : 0.0f;
    dot += softmax.get(first + j) * dp;
  }
  dot = block_sum(dot);  // its barriers also order every read above before the writes below
  for (std::size_t j = threadIdx.x; j < seq; j += blockDim.x) {
    const std::size_t at = first + j;
    float ds = 0;
    if (j <= i) {
      float dp = d_scores.get(at);
      if (drop.p > 0) dp = mask.get(at) != 0.0f ? dp * keep_scale : 0.0f;
      ds = softmax.get(at) * (dp - dot);
    }
    d_scores.set(at, ds);
  }
}

cudaDataType_t gemm_type(dtype t) {
  switch (t) {
    case dtype::fp32: return CUDA_R_32F;
    case dtype::bf16: return CUDA_R_16BF;
    default: return CUDA_R_16F;
  }
}

// One operand of a GEMM batched over the kv heads: the view, the element offset of kv head 0's matrix,
// its leading dimension and the element stride from one kv head's matrix to the next.
struct operand {
  const view& v;
  std::size_t offset, ld, stride;
  const void* at() const { return static_cast<const char*>(v.data) + offset * dtype_bytes(v.type); }
};

// Column-major C (m, n) = alpha op(A) op(B) + beta C for each kv head (cublasGemmStridedBatchedEx, fp32
// accumulation), the row-major tensors read as their column-major transposes.
void gemm_over_kv_heads(cublasOperation_t ta, cublasOperation_t tb, std::size_t m, std::size_t n, std::size_t k,
                        float alpha, const operand& a, const operand& b, float beta, const operand& c, std::size_t kv_heads) {
  TRAINPLAN_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      cublas_handle(), ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), &alpha, a.at(),
      gemm_type(a.v.type), static_cast<int>(a.ld), static_cast<long long>(a.stride), b.at(), gemm_type(b.v.type),
      static_cast<int>(b.ld), static_cast<long long>(b.stride), &beta, const_cast<void*>(c.at()), gemm_type(c.v.type),
      static_cast<int>(c.ld), static_cast<long long>(c.stride), static_cast<int>(kv_heads), CUBLAS_COMPUTE_32F,
      CUBLAS_GEMM_DEFAULT));
}

// cuBLAS needs one dtype for A, B and C here: fp32, bf16 or fp16 everywhere, whole GQA groups, and
// dimensions that fit its int arguments.
bool eager_gemm_path(const attention_shape& sh, std::initializer_list<const view*> views) {
  const dtype t = (*views.begin())->type;
  if (t != dtype::fp32 && t != dtype::bf16 && t != dtype::fp16) return false;
  for (const view* v : views)
    if (v->type != t) return false;
  constexpr std::size_t int_max = 2147483647;
  return sh.kv_heads > 0 && sh.heads % sh.kv_heads == 0 && sh.seq * sh.seq <= int_max && sh.qkv_width() <= int_max &&
         sh.out_width() <= int_max && sh.kv_heads <= 65535;
}

}  // namespace

void eager_attention_forward(const attention_shape& sh, const view& qkv, const view& softmax, const view& mask,
                             const view& dropped, const attention_dropout& drop, const view& out) {
  if (sh.batch == 0 || sh.seq == 0) return;
  if (eager_gemm_path(sh, {&qkv, &softmax, &out, drop.p > 0 ? &dropped : &qkv})) {
    // Query head h = kvh * g + gi: one GEMM per (batch, gi) batched over kvh, so every stride is constant.
    const std::size_t s = sh.seq, d = sh.head_dim, a = sh.heads, kv = sh.kv_heads, g = a / kv, w = sh.qkv_width();
    const view& probs = drop.p > 0 ? dropped : softmax;
    for (std::size_t b = 0; b < sh.batch; ++b)
      for (std::size_t gi = 0; gi < g; ++gi) {
        const std::size_t tokens = b * s * w, rows = (b * a + gi) * s * s;
        // Scores S_h = scale Q_h K^T, row-major (s, s), into softmax: column-major S^T = (K-view)^T Q-view.
        gemm_over_kv_heads(CUBLAS_OP_T, CUBLAS_OP_N, s, s, d, scale_of(sh), {qkv, tokens + a * d, w, d},
                           {qkv, tokens + gi * d, w, g * d}, 0.0f, {softmax, rows, s, g * s * s}, kv);
      }
    eager_softmax_rows_kernel<<<static_cast<unsigned>(sh.batch * sh.heads * sh.seq), 128>>>(
        sh.seq, device(softmax), device(mask), device(dropped), drop);
    TRAINPLAN_CUDA_LAUNCH_CHECK();
    for (std::size_t b = 0; b < sh.batch; ++b)
      for (std::size_t gi = 0; gi < g; ++gi) {
        const std::size_t tokens = b * s * w, rows = (b * a + gi) * s * s;
        // out_h = P~_h V, row-major (s, d) in (b, s, a d): column-major out^T = V-view P~-view.
        gemm_over_kv_heads(CUBLAS_OP_N, CUBLAS_OP_N, d, s, s, 1.0f, {qkv, tokens + (a + kv) * d, w, d},
                           {probs, rows, s, g * s * s}, 0.0f, {out, b * s * a * d + gi * d, a * d, g * d}, kv);
      }
    return;
  }
  const layout L = make_layout(sh, "attention");
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
  if (sh.batch == 0 || sh.seq == 0) return;
  if (eager_gemm_path(sh, {&qkv, &softmax, &d_out, &d_scores, &d_qkv, drop.p > 0 ? &dropped : &qkv})) {
    const std::size_t s = sh.seq, d = sh.head_dim, a = sh.heads, kv = sh.kv_heads, g = a / kv, w = sh.qkv_width();
    const float scale = scale_of(sh);
    const view& probs = drop.p > 0 ? dropped : softmax;
    for (std::size_t b = 0; b < sh.batch; ++b)
      for (std::size_t gi = 0; gi < g; ++gi) {
        const std::size_t tokens = b * s * w, rows = (b * a + gi) * s * s;
        // dP_h = dO_h V^T, row-major (s, s), into d_scores: column-major dP^T = (V-view)^T dO-view.
        gemm_over_kv_heads(CUBLAS_OP_T, CUBLAS_OP_N, s, s, d, 1.0f, {qkv, tokens + (a + kv) * d, w, d},
                           {d_out, b * s * a * d + gi * d, a * d, g * d}, 0.0f, {d_scores, rows, s, g * s * s}, kv);
      }
    eager_softmax_backward_rows_kernel<<<static_cast<unsigned>(sh.batch * sh.heads * sh.seq), 128>>>(
        sh.seq, device(softmax), device(mask), drop, device(d_scores));
    TRAINPLAN_CUDA_LAUNCH_CHECK();
    for (std::size_t b = 0; b < sh.batch; ++b)
      for (std::size_t gi = 0; gi < g; ++gi) {
        const std::size_t tokens = b * s * w, rows = (b * a + gi) * s * s;
        const float beta = gi == 0 ? 0.0f : 1.0f;  // dK, dV: the group's first head overwrites, the others add
        // dQ_h = scale dS_h K, row-major (s, d) in d_qkv: column-major dQ^T = K-view dS-view.
        gemm_over_kv_heads(CUBLAS_OP_N, CUBLAS_OP_N, d, s, s, scale, {qkv, tokens + a * d, w, d},
                           {d_scores, rows, s, g * s * s}, 0.0f, {d_qkv, tokens + gi * d, w, g * d}, kv);
        // dK += scale dS_h^T Q_h: column-major dK^T = Q-view (dS-view)^T.
        gemm_over_kv_heads(CUBLAS_OP_N, CUBLAS_OP_T, d, s, s, scale, {qkv, tokens + gi * d, w, g * d},
                           {d_scores, rows, s, g * s * s}, beta, {d_qkv, tokens + a * d, w, d}, kv);
        // dV += P~_h^T dO_h: column-major dV^T = dO-view (P~-view)^T.
        gemm_over_kv_heads(CUBLAS_OP_N, CUBLAS_OP_T, d, s, s, 1.0f, {d_out, b * s * a * d + gi * d, a * d, g * d},
                           {probs, rows, s, g * s * s}, beta, {d_qkv, tokens + (a + kv) * d, w, d}, kv);
      }
    return;
  }
  const layout L = make_layout(sh, "attention");
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

void rope_apply(const attention_shape& sh, const view& qkv, bool inverse) {
  // Not make_layout: RoPE keeps no per-thread arrays, so any head_dim goes, as on the CPU.
  const layout L{sh.batch, sh.seq, sh.heads, sh.kv_heads, sh.head_dim};
  const std::size_t n = sh.batch * sh.seq * (sh.heads + sh.kv_heads) * (sh.head_dim / 2);
  if (n == 0) return;
  rope_kernel<<<blocks_for(n, 256), 256>>>(L, device(qkv), inverse, n);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

}  // namespace trainplan::kernels::cuda
