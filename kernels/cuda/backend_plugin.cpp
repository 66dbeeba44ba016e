// The exported entry point of libtrainplan_cuda_backend.so (kernels/cuda/backend_api.hpp).
#include "kernels/cuda/backend_api.hpp"
#include "kernels/cuda/ops.hpp"

#include <cstring>

namespace {

const char* flash_kernel(const char* select) {
  namespace cuda = trainplan::kernels::cuda;
  if (select == nullptr) return cuda::flash_kernel_name(cuda::selected_flash_kernel());
  for (cuda::flash_kernel k : {cuda::flash_kernel::mma, cuda::flash_kernel::wmma})
    if (std::strcmp(select, cuda::flash_kernel_name(k)) == 0) {
      cuda::set_flash_kernel(k);
      return cuda::flash_kernel_name(k);
    }
  return nullptr;
}

}  // namespace

extern "C" const trainplan::kernels::cuda::backend_api* trainplan_cuda_backend_v1() {
  namespace cuda = trainplan::kernels::cuda;
  static const cuda::backend_api api{cuda::unavailable_reason, cuda::cuda_kernel_ops, cuda::device_name, flash_kernel};
  return &api;
}
