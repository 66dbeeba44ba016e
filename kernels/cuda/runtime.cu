// Device discovery, memory, copies and the process's cuBLAS handle.
#include <mutex>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.hpp"

namespace trainplan::kernels::cuda {

std::string unavailable_reason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so a later probe starts clean
    return std::string("no usable CUDA device: ") + cudaGetErrorString(err);
  }
  if (count == 0) return "no CUDA device";
  return "";
}

void* device_alloc(std::size_t bytes) {
  void* p = nullptr;
  TRAINPLAN_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
  TRAINPLAN_CUDA_CHECK(cudaMemset(p, 0, bytes == 0 ? 1 : bytes));
  return p;
}
void device_free(void* ptr) { TRAINPLAN_CUDA_CHECK(cudaFree(ptr)); }
void copy_to_device(void* dst, const void* src, std::size_t bytes) {
  TRAINPLAN_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
void copy_to_host(void* dst, const void* src, std::size_t bytes) {
  TRAINPLAN_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
void synchronize() { TRAINPLAN_CUDA_CHECK(cudaDeviceSynchronize()); }

std::string device_name() {
  cudaDeviceProp prop{};
  TRAINPLAN_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  return prop.name;
}

std::uint64_t device_used_bytes() {
  std::size_t free = 0, total = 0;
  TRAINPLAN_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return total - free;
}

namespace {
void release(void* p) { device_free(p); }
void upload(void* dst, const void* src, std::size_t bytes) { copy_to_device(dst, src, bytes); }
void download(void* dst, const void* src, std::size_t bytes) { copy_to_host(dst, src, bytes); }
}  // namespace

const kernel_ops& cuda_kernel_ops() {
  static const kernel_ops ops = [] {
    kernel_ops o;
    o.backend = "cuda";
    o.alloc = device_alloc;
    o.release = release;
    o.upload = upload;
    o.download = download;
    o.synchronize = synchronize;
    o.device_used_bytes = device_used_bytes;
#define TRAINPLAN_KERNEL_ASSIGN(name) o.name = ::trainplan::kernels::cuda::name;  // never the CPU one by fallback
    TRAINPLAN_KERNEL_OPS(TRAINPLAN_KERNEL_ASSIGN)
#undef TRAINPLAN_KERNEL_ASSIGN
    return o;
  }();
  return ops;
}

cublasHandle_t cublas_handle() {
  // 32 MiB: the workspace cuBLAS documents for Hopper (4 MiB suffices before it); calibration.json
  // carries the same figure as cublas_workspace_bytes.
  constexpr std::size_t workspace_bytes = 32u << 20;
  static cublasHandle_t handle = nullptr;
  static void* workspace = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    TRAINPLAN_CUBLAS_CHECK(cublasCreate(&handle));
    TRAINPLAN_CUDA_CHECK(cudaMalloc(&workspace, workspace_bytes));
    TRAINPLAN_CUBLAS_CHECK(cublasSetWorkspace(handle, workspace, workspace_bytes));
  });
  return handle;
}

}  // namespace trainplan::kernels::cuda
