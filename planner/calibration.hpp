#pragma once
// Constants a real GPU run shows and an analytic model cannot derive (data/calibration.json).
#include <cstdint>
#include <string>

namespace trainplan {

struct calibration {
  std::uint64_t cuda_context_bytes = 0;      // CUDA context and loaded kernels (this project's harness)
  std::uint64_t hf_cuda_context_bytes = 0;   // PyTorch's CUDA context (--framework hf): device bytes in use
                                             // after CUDA initialisation less torch's reserved bytes
  std::uint64_t cublas_workspace_bytes = 0;  // cuBLAS(Lt) workspace of one handle
  double allocator_slack_fraction = 0;       // caching-allocator rounding and fragmentation, x tensor peak
  double achieved_efficiency = 0;            // fraction of dense peak achieved on hardware FLOPs (e_max)
  // GEMM-size dependence fitted by `plan calibrate`: e(n) = e_max * n / (n + n_half), n = tokens per
  // micro-batch (the M of every layer GEMM). 0: the efficiency is the constant e_max.
  double efficiency_half_tokens = 0;
  double safety_margin_fraction = 0;         // memory the search keeps free for what the model misses

  double efficiency_at(double tokens_per_micro_batch) const {
    return efficiency_half_tokens > 0
               ? achieved_efficiency * tokens_per_micro_batch / (tokens_per_micro_batch + efficiency_half_tokens)
               : achieved_efficiency;
  }
  std::string source;
};

}  // namespace trainplan
