// Softmax cross-entropy fused with its gradient, one thread block per row (llm.c's fused classifier). The
// row losses are added into the caller's buffer on the device: nothing is read back inside the step. Target
// ids are checked on the host where they enter (validate/transformer.cpp), not here.
#include <cstdint>
#include <stdexcept>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.hpp"

namespace trainplan::kernels::cuda {
namespace {

__global__ void cross_entropy_kernel(dview logits, dview targets, dview d_logits, float* token_losses, std::size_t vocab,
                                     std::size_t padded_vocab, float grad_scale) {
  const std::size_t row = blockIdx.x, base = row * padded_vocab;
  const auto target = static_cast<std::size_t>(targets.get_i32(row));
  // Read before the barriers below: once past them, another thread may write the gradient over it.
  const float target_logit = logits.get(base + target);
  float m = -INFINITY;
  for (std::size_t v = threadIdx.x; v < vocab; v += blockDim.x) m = fmaxf(m, logits.get(base + v));
  m = block_max(m);
  float s = 0;
  for (std::size_t v = threadIdx.x; v < vocab; v += blockDim.x) s += expf(logits.get(base + v) - m);
  const float log_sum = logf(block_sum(s)) + m;
  // Each thread reads its element, then writes its gradient there: d_logits may be the logits.
  for (std::size_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    const float prob = expf(logits.get(base + v) - log_sum);
    d_logits.set(base + v, (prob - (v == target ? 1.0f : 0.0f)) * grad_scale);
  }
  // The padded columns (llm.c's padded vocabulary) are not classes: never read, zero gradient.
  for (std::size_t v = vocab + threadIdx.x; v < padded_vocab; v += blockDim.x) d_logits.set(base + v, 0.0f);
  if (threadIdx.x == 0) token_losses[row] += log_sum - target_logit;  // one thread per row: no race
}

// The fast path, as the harness runs it: 16-bit logits overwritten by their gradient, rows of a multiple of
// 8 elements, 16-byte aligned (llm.c's fused_classifier). One pass reads the row once in 16-byte packs and
// keeps each thread's running maximum and sum of exponentials (the online softmax, Milakov & Gimelshein
// 2018), merged over the block; a second reads it again and writes the gradient in place. The generic kernel
// above reads a row three times, an element at a time through the dtype switch (19.5% of the H100's
// bandwidth roofline, 5.0 ms of a GPT-2 b16 step).
constexpr unsigned fast_threads = 512;

// (m, s) and (m2, s2): running maxima and sums of exp(x - m); -inf with 0 is an empty set.
__device__ inline void merge_softmax(float& m, float& s, float m2, float s2) {
  const float mn = fmaxf(m, m2);
  if (mn == -INFINITY) return;  // both empty: exp(-inf - -inf) would be NaN
  s = s * expf(m - mn) + s2 * expf(m2 - mn);
  m = mn;
}

template <class T>
__global__ void __launch_bounds__(fast_threads)
    cross_entropy_packed_kernel(T* logits, dview targets, float* token_losses, std::size_t vocab, std::size_t padded_vocab,
                                float grad_scale) {
  __shared__ float warp_m[fast_threads / 32], warp_s[fast_threads / 32];
  const std::size_t row = blockIdx.x;
  T* const x = logits + row * padded_vocab;
  const auto target = static_cast<std::size_t>(targets.get_i32(row));
  const float target_logit = to_float(x[target]);  // read before the barrier: the row is overwritten after it
  const std::size_t packs = padded_vocab / pack_elements;
  float m = -INFINITY, s = 0.0f;
  for (std::size_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const std::size_t first = p * pack_elements;
    if (first >= vocab) break;  // only padding from here on (p grows)
    T pack[pack_elements];
    load_pack(x + first, pack);
    float v[pack_elements], pack_max = -INFINITY;
#pragma unroll
    for (int k = 0; k < pack_elements; ++k) {
      v[k] = first + k < vocab ? to_float(pack[k]) : -INFINITY;  // a pack may straddle the last class
      pack_max = fmaxf(pack_max, v[k]);
    }
    if (pack_max == -INFINITY) continue;  // every class here at -inf: adds nothing (and exp(-inf - -inf) is NaN)
    float pack_sum = 0.0f;
#pragma unroll
    for (int k = 0; k < pack_elements; ++k) pack_sum += expf(v[k] - pack_max);  // exp(-inf) = 0
    merge_softmax(m, s, pack_max, pack_sum);
  }
  for (int o = 16; o > 0; o >>= 1) merge_softmax(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  if (lane == 0) {
    warp_m[warp] = m;
    warp_s[warp] = s;
  }
  __syncthreads();  // every read of the first pass is done: the row may be written from here on
  m = lane < warps ? warp_m[lane] : -INFINITY;
  s = lane < warps ? warp_s[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) merge_softmax(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
  const float log_sum = logf(s) + m;
  for (std::size_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const std::size_t first = p * pack_elements;
    T pack[pack_elements];
    if (first < vocab) load_pack(x + first, pack);  // this thread's own pack: read, then overwritten
#pragma unroll
    for (int k = 0; k < pack_elements; ++k) {
      const std::size_t v = first + k;
      const float g = v < vocab ? (expf(to_float(pack[k]) - log_sum) - (v == target ? 1.0f : 0.0f)) * grad_scale : 0.0f;
      pack[k] = from_float<T>(g);
    }
    store_pack(x + first, pack);
  }
  if (threadIdx.x == 0) token_losses[row] += log_sum - target_logit;  // one thread per row: no race
}

// Whether a 16-bit call can take the packed kernel: in place, rows of whole 16-byte packs.
bool packs_fit(const view& logits, const view& d_logits, std::size_t padded_vocab) {
  return logits.data == d_logits.data && logits.type == d_logits.type && padded_vocab % pack_elements == 0 &&
         reinterpret_cast<std::uintptr_t>(logits.data) % 16 == 0;
}

}  // namespace

void cross_entropy_forward_backward(const view& logits, const view& targets, const view& d_logits,
                                    const view& token_losses, std::size_t rows, std::size_t vocab,
                                    std::size_t padded_vocab, float grad_scale) {
  if (token_losses.type != dtype::fp32 || token_losses.size < rows)
    throw std::invalid_argument("cross entropy: token_losses must be fp32 with one element per row");
  if (padded_vocab < vocab) throw std::invalid_argument("cross entropy: a padded row is narrower than the vocabulary");
  if (rows == 0) return;
  float* const losses = static_cast<float*>(token_losses.data);
  if (logits.type == dtype::bf16 && packs_fit(logits, d_logits, padded_vocab)) {
    cross_entropy_packed_kernel<__nv_bfloat16><<<static_cast<unsigned>(rows), fast_threads>>>(
        static_cast<__nv_bfloat16*>(logits.data), device(targets), losses, vocab, padded_vocab, grad_scale);
    TRAINPLAN_CUDA_LAUNCH_CHECK();
    return;
  }
  if (logits.type == dtype::fp16 && packs_fit(logits, d_logits, padded_vocab)) {
    cross_entropy_packed_kernel<__half><<<static_cast<unsigned>(rows), fast_threads>>>(
        static_cast<__half*>(logits.data), device(targets), losses, vocab, padded_vocab, grad_scale);
    TRAINPLAN_CUDA_LAUNCH_CHECK();
    return;
  }
  cross_entropy_kernel<<<static_cast<unsigned>(rows), 256>>>(device(logits), device(targets), device(d_logits),
                                                             losses, vocab, padded_vocab,
                                                             grad_scale);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

}  // namespace trainplan::kernels::cuda
