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
};

}  // namespace trainplan::kernels::cuda

// The plugin's one exported symbol, looked up by name with dlsym.
extern "C" const trainplan::kernels::cuda::backend_api* trainplan_cuda_backend_v1();
