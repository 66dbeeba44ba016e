#pragma once
// Constants a real GPU run shows and an analytic model cannot derive (data/calibration.json).
#include <cstdint>
#include <string>

namespace trainplan {

struct calibration {
  std::uint64_t cuda_context_bytes = 0;      // CUDA context and loaded kernels
  std::uint64_t cublas_workspace_bytes = 0;  // cuBLAS(Lt) workspace of one handle
  double allocator_slack_fraction = 0;       // caching-allocator rounding and fragmentation, x tensor peak
  double achieved_efficiency = 0;            // fraction of dense peak achieved on hardware FLOPs
  double safety_margin_fraction = 0;         // memory the search keeps free for what the model misses
  std::string source;
};

}  // namespace trainplan
