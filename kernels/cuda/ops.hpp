#pragma once
// The CUDA kernels, callable from plain C++ (no CUDA headers here). Each op has the signature of its CPU
// reference in kernels/*.hpp, with the views pointing at device memory; the CPU version is the reference
// every CUDA op is tested against (tests/gpu/). All calls are checked: a CUDA or cuBLAS error throws
// std::runtime_error naming the file, line and call.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/adamw.hpp"
#include "kernels/attention.hpp"
#include "kernels/ops_table.hpp"
#include "kernels/view.hpp"

namespace trainplan::kernels::cuda {

// Empty when a CUDA device can be used; otherwise why not (no driver, no device...). Any error from the
// runtime counts as "no GPU here" (without a driver cudaGetDeviceCount fails rather than returning 0).
std::string unavailable_reason();

// The harness's kernel table on the GPU: device memory (zero-filled), copies, these kernels.
const kernel_ops& cuda_kernel_ops();
std::string device_name();          // "NVIDIA H100 80GB HBM3"
// What the harness holds on the device: the memory in use before its arena was reserved (context, cuBLAS
// handle and workspace, as cudaMemGetInfo reported then) plus the arena's extent (its live buffers and the
// gaps between them). Known on the host: no driver call, no synchronization.
std::uint64_t device_used_bytes();

// Plain cudaMalloc (zero-filled) and cudaFree, for the tests. The kernel table allocates from the arena.
void* device_alloc(std::size_t bytes);
void device_free(void* ptr);
void copy_to_device(void* dst, const void* src, std::size_t bytes);
void copy_to_host(void* dst, const void* src, std::size_t bytes);
void synchronize();

// GEMMs through cuBLAS with fp32 accumulation (CUBLAS_COMPUTE_32F; a forward with a bias through cuBLASLt,
// the bias added in its epilogue: gemm.cu), row-major as the CPU
// kernels: out (M, N) = in (M, K) . W (N, K)^T + bias.
void linear_forward(const view& in, const view& weight, const view* bias, const view& out, std::size_t M, std::size_t N,
                    std::size_t K);
void linear_backward_input(const view& d_out, const view& weight, const view& d_in, std::size_t M, std::size_t N,
                           std::size_t K, bool accumulate);
void linear_backward_weight(const view& d_out, const view& in, const view& d_weight, const view* d_bias, std::size_t M,
                            std::size_t N, std::size_t K);

void layer_norm_forward(const view& x, const view& weight, const view& bias, const view& y, std::size_t rows,
                        std::size_t width);
void layer_norm_backward(const view& x, const view& weight, const view& dy, const view& dx, const view& d_weight,
                         const view& d_bias, const view& partials, std::size_t rows, std::size_t width);
void rms_norm_forward(const view& x, const view& weight, const view& y, std::size_t rows, std::size_t width);
void residual_norm_forward(const view& residual, const view* mask, float keep_scale, const view& sum, const view& weight,
                           const view* bias, const view& out, std::size_t rows, std::size_t width);
void rms_norm_backward(const view& x, const view& weight, const view& dy, const view& dx, const view& d_weight,
                       const view& partials, std::size_t rows, std::size_t width);

void gelu_forward(const view& x, const view& y, std::size_t n);
void gelu_backward(const view& x, const view& dy, const view& dx, std::size_t n);
void swiglu_forward(const view& gate, const view& up, const view& y, std::size_t n);
void swiglu_backward(const view& gate, const view& up, const view& dy, const view& d_gate, const view& d_up,
                     std::size_t n);

void dropout_mask(std::uint64_t seed, std::uint64_t site, float p, const view& mask, std::size_t n);

void cross_entropy_forward_backward(const view& logits, const view& targets, const view& d_logits,
                                    const view& token_losses, std::size_t rows, std::size_t vocab,
                                    std::size_t padded_vocab, float grad_scale);

void adamw_step(const adamw_config& cfg, int step, const view& params, const view& grads, float grad_scale,
                const view& m, const view& v, const view& low_precision_copy, std::size_t n);
bool has_non_finite(const view& grads, const view& flag, std::size_t n);

void embedding_forward(const view& tokens, const view& wte, const view& wpe, const view& out, std::size_t batch,
                       std::size_t seq, std::size_t width);
void embedding_backward(const view& tokens, const view& d_out, const view& d_wte, const view& d_wpe, const view& scratch,
                        std::size_t batch, std::size_t seq, std::size_t width, std::size_t vocab);

void eager_attention_forward(const attention_shape& sh, const view& qkv, const view& softmax, const view& mask,
                             const view& dropped, const attention_dropout& drop, const view& out);
void eager_attention_backward(const attention_shape& sh, const view& qkv, const view& softmax, const view& mask,
                              const view& dropped, const attention_dropout& drop, const view& d_out,
                              const view& d_scores, const view& d_qkv);
// Which tensor-core kernels the flash ops run for 16-bit qkv: mma (PTX mma.sync, the scores kept in
// registers: attention_flash_mma.cu) or wmma (nvcuda::wmma, the score tiles staged in shared memory:
// attention_flash_tiled.cu). The default is mma; the environment variable TRAINPLAN_FLASH_KERNEL=wmma picks
// the other at start-up (a fallback should the mma kernels fail on some GPU). Shapes neither takes run the
// simple kernels either way.
enum class flash_kernel { mma, wmma };
void set_flash_kernel(flash_kernel k);
flash_kernel selected_flash_kernel();
const char* flash_kernel_name(flash_kernel k);

void flash_attention_forward(const attention_shape& sh, const view& qkv, const attention_dropout& drop, const view& out,
                             const view& lse);
void flash_attention_backward(const attention_shape& sh, const view& qkv, const view& out, const view& lse,
                              const attention_dropout& drop, const view& d_out, const view& delta, const view& d_qkv);
void rope_apply(const attention_shape& sh, const view& qkv, bool inverse);

void residual_dropout(const view& residual, const view* mask, float keep_scale, const view& y, std::size_t n);
void dropout_apply(const view& in, const view* mask, float keep_scale, const view& out, std::size_t n);
void convert(const view& in, const view& out, std::size_t n);
void fill(const view& out, float value, std::size_t n);
void accumulate_and_clear(const view& dst, const view& src, std::size_t n);

}  // namespace trainplan::kernels::cuda
