// Token and position embeddings. The backward scatters into the caller's fp32 scratch (a tracked buffer,
// bwd.embed_grad_fp32; only the rows of tokens seen get contributions) and adds it to the stored
// gradients once. Token ids are not checked here (a check would need a read-back inside the step): the
// harness refuses ids outside the vocabulary on the host, where they enter (validate/transformer.cpp).
#include <stdexcept>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.hpp"

namespace trainplan::kernels::cuda {
namespace {

__global__ void embedding_forward_kernel(dview tokens, dview wte, dview wpe, bool has_positions, dview out, std::size_t seq,
                                         std::size_t width, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const std::size_t row = i / width, e = i % width, t = row % seq;
  float x = wte.get(static_cast<std::size_t>(tokens.get_i32(row)) * width + e);
  if (has_positions) x += wpe.get(t * width + e);
  out.set(i, x);
}

__global__ void embedding_backward_kernel(dview tokens, dview d_out, float* d_wte, float* d_wpe, std::size_t seq,
                                          std::size_t width, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const std::size_t row = i / width, e = i % width, t = row % seq;
  const float g = d_out.get(i);
  atomicAdd(&d_wte[static_cast<std::size_t>(tokens.get_i32(row)) * width + e], g);
  if (d_wpe) atomicAdd(&d_wpe[t * width + e], g);
}

__global__ void add_kernel(dview target, const float* scratch, std::size_t n) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n && scratch[i] != 0.0f) target.set(i, target.get(i) + scratch[i]);
}

}  // namespace

void embedding_forward(const view& tokens, const view& wte, const view& wpe, const view& out, std::size_t batch,
                       std::size_t seq, std::size_t width) {
  const std::size_t n = batch * seq * width;
  if (n == 0) return;
  embedding_forward_kernel<<<blocks_for(n, 256), 256>>>(device(tokens), device(wte), device(wpe), wpe.data != nullptr,
                                                        device(out), seq, width, n);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
}

void embedding_backward(const view& tokens, const view& d_out, const view& d_wte, const view& d_wpe, const view& fp32_scratch,
                        std::size_t batch, std::size_t seq, std::size_t width, std::size_t vocab) {
  const std::size_t n = batch * seq * width, wte_n = vocab * width, wpe_n = d_wpe.data ? seq * width : 0;
  if (fp32_scratch.type != dtype::fp32 || fp32_scratch.size < wte_n + wpe_n)
    throw std::invalid_argument("embedding backward: the fp32 scratch is too small");
  if (n == 0) return;  // no token: no gradient to add
  float* scratch = static_cast<float*>(fp32_scratch.data);
  TRAINPLAN_CUDA_CHECK(cudaMemsetAsync(scratch, 0, (wte_n + wpe_n) * sizeof(float), 0));
  embedding_backward_kernel<<<blocks_for(n, 256), 256>>>(device(tokens), device(d_out), scratch,
                                                         wpe_n ? scratch + wte_n : nullptr, seq, width, n);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
  add_kernel<<<blocks_for(wte_n, 256), 256>>>(device(d_wte), scratch, wte_n);
  TRAINPLAN_CUDA_LAUNCH_CHECK();
  if (wpe_n) {
    add_kernel<<<blocks_for(wpe_n, 256), 256>>>(device(d_wpe), scratch + wte_n, wpe_n);
    TRAINPLAN_CUDA_LAUNCH_CHECK();
  }
}

}  // namespace trainplan::kernels::cuda
