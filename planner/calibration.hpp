#pragma once
// Constants a real GPU run shows and an analytic model cannot derive (data/calibration.json).
#include <array>
#include <cstdint>
#include <string>

#include "planner/framework.hpp"
#include "planner/roofline.hpp"

namespace trainplan {

struct calibration {
  std::uint64_t cuda_context_bytes = 0;      // CUDA context and loaded kernels (this project's harness)
  std::uint64_t hf_cuda_context_bytes = 0;   // PyTorch's CUDA context (--framework hf): device bytes in use
                                             // after CUDA initialisation less torch's reserved bytes
  std::uint64_t cublas_workspace_bytes = 0;  // cuBLAS(Lt) workspace of one handle
  double allocator_slack_fraction = 0;       // caching-allocator rounding and fragmentation, x tensor peak
  // The per-op roofline's constants for each framework profile (index: framework_kind).
  std::array<timing_constants, 4> timing{};
  double safety_margin_fraction = 0;         // memory the search keeps free for what the model misses

  std::string source;

  const timing_constants& timing_for(framework_kind f) const { return timing[static_cast<std::size_t>(f)]; }
  timing_constants& timing_for(framework_kind f) { return timing[static_cast<std::size_t>(f)]; }
};

}  // namespace trainplan
