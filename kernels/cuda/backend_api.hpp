#pragma once
// The CUDA backend as `plan` loads it: a plugin (libtrainplan_cuda_backend.so beside the binary) opened
// only when a command asks for the GPU. Linking cuBLAS into `plan` itself cost 0.4 s at every start
// (cuBLASLt's static initialisers), for every fit check and every test. Plain C++: no CUDA headers here.
#include <string>

#include "kernels/ops_table.hpp"

namespace trainplan::kernels::cuda {

struct backend_api {
  std::string (*unavailable_reason)();  // empty when a CUDA device can be used
  const kernel_ops& (*kernel_table)();  // the harness's kernels on the GPU
  std::string (*device_name)();
  // The flash attention kernels of 16-bit qkv (kernels/cuda/ops.hpp flash_kernel): with a name ("mma" or
  // "wmma") selects them and returns that name, nullptr for an unknown one; with nullptr returns the current.
  const char* (*flash_kernel)(const char* select);
};

}  // namespace trainplan::kernels::cuda

// The plugin's one exported symbol, looked up by name with dlsym.
extern "C" const trainplan::kernels::cuda::backend_api* trainplan_cuda_backend_v1();
