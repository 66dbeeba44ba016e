#pragma once
// Opens the CUDA backend plugin (kernels/cuda/backend_api.hpp) the first time a command needs the GPU.
#include "kernels/cuda/backend_api.hpp"

namespace trainplan::cli {

// The backend, or throws input_error saying why there is none: a build without nvcc, a missing plugin,
// or no usable device (the plugin's own reason).
const kernels::cuda::backend_api& cuda_backend(const char* option);

}  // namespace trainplan::cli
