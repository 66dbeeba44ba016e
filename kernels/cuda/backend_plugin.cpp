// The exported entry point of libtrainplan_cuda_backend.so (kernels/cuda/backend_api.hpp).
#include "kernels/cuda/backend_api.hpp"
#include "kernels/cuda/ops.hpp"

extern "C" const trainplan::kernels::cuda::backend_api* trainplan_cuda_backend_v1() {
  namespace cuda = trainplan::kernels::cuda;
  static const cuda::backend_api api{cuda::unavailable_reason, cuda::cuda_kernel_ops, cuda::device_name};
  return &api;
}
