#pragma once
// The constants of the step-time model a GPU and a training stack show (data/calibration.json, `plan
// calibrate`): GEMM and attention efficiencies, achieved bandwidth, and the host's costs per kernel, per step
// and per parameter tensor. planner/time/roofline.hpp turns them into time.
namespace trainplan {

struct timing_constants {
  // GEMM efficiency e(m, n, k) = e_max * g(m) g(n) g(k) with g(x) = x / (x + gemm_half_dim): a GEMM reaches
  // e_max of the dense peak when every dimension is large, half of that per dimension at gemm_half_dim
  // (small dimensions underfill the tiles and the SMs).
  double gemm_efficiency = 0.7;
  double gemm_half_dim = 64;
  // fp32 GEMMs without TF32 (PyTorch's default) run on the CUDA cores, whose lower peak cuBLAS approaches
  // more closely than a tensor-core peak: their own e_max.
  double fp32_gemm_efficiency = 0.85;
  double attention_efficiency = 0.4;   // fused attention kernels' fraction of the dense peak
  double bandwidth_fraction = 0.8;     // achieved fraction of the HBM bandwidth in streaming kernels
  double kernel_seconds = 4e-6;        // device: per kernel launched, the gap between dependent kernels
  double step_seconds = 0;             // host: per step, before its first kernel
  double foreach_tensor_seconds = 0;   // host: per parameter tensor in PyTorch's foreach optimizer
  // Host: per kernel launched from Python (eager forward and recomputation: module calls, autocast and the
  // dispatcher for each op), and per kernel launched from C++ (the autograd engine, a foreach call's
  // kernels). 0 for programs whose host always runs ahead of the GPU.
  double forward_kernel_seconds = 0;
  double backward_kernel_seconds = 0;

  double gemm_efficiency_at(double m, double n, double k, bool fp32 = false) const {
    auto g = [&](double x) { return x / (x + gemm_half_dim); };
    return (fp32 ? fp32_gemm_efficiency : gemm_efficiency) * g(m) * g(n) * g(k);
  }
};

// What data/calibration.json may hold, and so what `plan calibrate` may fit. Efficiencies and fractions
// divide FLOPs and bytes: below 0.1% no real kernel runs, and values near zero (1e-320) made op times
// infinite and the report print nan. The host costs are bounded so that a step stays within an hour.
struct timing_limits {
  static constexpr double min_efficiency = 0.001;  // gemm, fp32 gemm, attention and bandwidth; at most 1
  static constexpr double max_gemm_half_dim = 1e6;
  static constexpr double max_kernel_seconds = 1;
  static constexpr double max_step_seconds = 3600;
  static constexpr double max_foreach_tensor_seconds = 1;
  static constexpr double max_host_kernel_seconds = 1;  // forward and backward kernel seconds
};

}  // namespace trainplan
