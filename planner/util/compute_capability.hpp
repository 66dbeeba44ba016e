#pragma once
// CUDA's compute capability, major.minor (cudaDeviceProp::major and ::minor; NVIDIA's CUDA GPUs page lists each
// GPU's): which kernels a library can run on a GPU (PyTorch's SDPA backends) and which kernel images its CUDA
// context loads. The GPU's (planner/system/gpu_spec.hpp) and, for the stacks below it, the run's.
namespace trainplan {

struct compute_capability {
  unsigned major = 0;  // 0: not known (a user's gpus.json may leave it out)
  unsigned minor = 0;
  bool known() const { return major > 0; }
  bool at_least(unsigned maj, unsigned min) const { return order() >= maj * 100 + min; }
  // Within [lo, hi], both inclusive (PyTorch's check_sm_version).
  bool within(compute_capability lo, compute_capability hi) const { return order() >= lo.order() && order() <= hi.order(); }
  unsigned order() const { return major * 100 + minor; }  // minors stay below 100
  bool operator==(const compute_capability&) const = default;
};

}  // namespace trainplan
