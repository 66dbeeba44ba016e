// Device discovery, the harness's device memory (one arena), copies and the process's cuBLAS handle.
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.hpp"
#include "kernels/device_arena.hpp"

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
  // From pageable host memory the runtime stages the data before returning, so `src` may go away at
  // once, and the copy waits for no earlier kernel on the host's side (CUDA Runtime API, "API
  // synchronization behavior": asynchronous pageable host-to-device copies).
  TRAINPLAN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, 0));
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

namespace {

// The harness's buffers live in one block reserved when the kernel table is first used: a
// step then allocates and frees without calling the driver and without synchronizing, and the device
// memory it needs is known on the host at every allocation (the arena's extent) instead of being read
// with cudaMemGetInfo. The block is all free memory less arena_driver_headroom_bytes (kernels/device_arena.hpp).

void zero_fill_async(void* p, std::size_t bytes) { TRAINPLAN_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, 0)); }

struct harness_memory {
  std::uint64_t before_arena_bytes = 0;  // context, loaded modules, the cuBLAS handle and its workspace
  arena_memory memory{nullptr, 0, zero_fill_async};
};

harness_memory& memory() {
  static harness_memory* m = [] {
    // Released to the static only once set up: a failure below throws, and the next use tries afresh
    // without leaking this one. Never freed after that: the arena lives as long as the process.
    auto h = std::make_unique<harness_memory>();
    cublas_handle();  // its workspace is allocated now, outside the arena
    std::size_t free = 0, total = 0;
    TRAINPLAN_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    h->before_arena_bytes = total - free;
    std::uint64_t capacity = free > arena_driver_headroom_bytes ? free - arena_driver_headroom_bytes : 0;
    if (const char* cap = std::getenv("TRAINPLAN_ARENA_BYTES")) {
      const std::optional<std::uint64_t> bytes = parse_arena_bytes(cap);
      if (!bytes)
        throw std::invalid_argument(std::string("TRAINPLAN_ARENA_BYTES: '") + cap +
                                    "' is not a byte count (digits, optionally followed by M or G)");
      capacity = std::min(capacity, *bytes);
    }
    void* base = nullptr;
    if (capacity > 0) TRAINPLAN_CUDA_CHECK(cudaMalloc(&base, capacity));
    h->memory = arena_memory(base, capacity, zero_fill_async);  // zero-filled in stream order
    return h.release();
  }();
  return *m;
}

void* arena_alloc(std::size_t bytes) { return memory().memory.allocate(bytes); }
// Stream order makes this safe without waiting: a kernel still queued on the freed block runs before
// anything queued later on the block's next owner.
void release(void* p) { memory().memory.release(p); }
void upload(void* dst, const void* src, std::size_t bytes) { copy_to_device(dst, src, bytes); }
void download(void* dst, const void* src, std::size_t bytes) { copy_to_host(dst, src, bytes); }
}  // namespace

std::uint64_t device_used_bytes() {
  const harness_memory& m = memory();
  return m.before_arena_bytes + m.memory.arena().extent_bytes();
}

const kernel_ops& cuda_kernel_ops() {
  static const kernel_ops ops = [] {
    kernel_ops o;
    o.backend = "cuda";
    o.alloc = arena_alloc;
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

namespace {
// 32 MiB: the workspace cuBLAS documents for Hopper (4 MiB suffices before it); calibration.json carries
// the same figure as cublas_workspace_bytes. cuBLAS and cuBLASLt share it: both run on the default stream,
// so one's use of it ends before the other's begins.
constexpr std::size_t cublas_workspace_size = 32u << 20;
void* workspace_block = nullptr;
}  // namespace

cublasHandle_t cublas_handle() {
  static cublasHandle_t handle = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    TRAINPLAN_CUBLAS_CHECK(cublasCreate(&handle));
    // fp32 accumulation throughout (kernels/cuda/ops.hpp): no split-K partial sums reduced in bf16/fp16.
    TRAINPLAN_CUBLAS_CHECK(cublasSetMathMode(
        handle, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    TRAINPLAN_CUDA_CHECK(cudaMalloc(&workspace_block, cublas_workspace_size));
    TRAINPLAN_CUBLAS_CHECK(cublasSetWorkspace(handle, workspace_block, cublas_workspace_size));
  });
  return handle;
}

cublas_workspace cublas_workspace_of_handle() {
  cublas_handle();  // allocates it
  return {workspace_block, cublas_workspace_size};
}

cublasLtHandle_t cublaslt_handle() {
  static cublasLtHandle_t handle = nullptr;
  static std::once_flag once;
  std::call_once(once, [] { TRAINPLAN_CUBLAS_CHECK(cublasLtCreate(&handle)); });
  return handle;
}

}  // namespace trainplan::kernels::cuda
