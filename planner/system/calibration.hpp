#pragma once
// Constants a real GPU run shows and an analytic model cannot derive (data/calibration.json).
#include <array>
#include <cstdint>
#include <string>

#include "planner/run/framework.hpp"
#include "planner/system/timing_constants.hpp"

namespace trainplan {

struct calibration {
  std::uint64_t cuda_context_bytes = 0;      // CUDA context and loaded kernels of a CUDA program (literature)
  std::uint64_t hf_cuda_context_bytes = 0;   // PyTorch's CUDA context (--framework hf): device bytes in use
                                             // after CUDA initialisation less torch's reserved bytes
  std::uint64_t cublas_workspace_bytes = 0;  // cuBLAS(Lt) workspace of one handle
  double allocator_slack_fraction = 0;       // caching-allocator rounding and fragmentation, x tensor peak
  // This project's harness (--framework trainplan) as `plan calibrate` measured it on a GPU; 0 and a
  // negative fraction: not calibrated, the two above apply. Kept apart so that a harness measurement does
  // not become Megatron's context or slack.
  std::uint64_t trainplan_cuda_context_bytes = 0;
  double trainplan_allocator_slack_fraction = -1;
  std::uint64_t context_bytes_for(framework_kind f) const {
    if (f == framework_kind::hf) return hf_cuda_context_bytes;
    if (f == framework_kind::trainplan && trainplan_cuda_context_bytes > 0) return trainplan_cuda_context_bytes;
    return cuda_context_bytes;
  }
  double slack_fraction_for(framework_kind f) const {
    if (f == framework_kind::llmc) return 0.0;  // llm.c takes its few large blocks straight from cudaMalloc
    return f == framework_kind::trainplan && trainplan_allocator_slack_fraction >= 0 ? trainplan_allocator_slack_fraction
                                                                                     : allocator_slack_fraction;
  }
  bool trainplan_calibrated() const { return trainplan_cuda_context_bytes > 0; }
  // The per-op roofline's constants for each framework profile (index: framework_kind).
  std::array<timing_constants, 4> timing{};
  double safety_margin_fraction = 0;         // memory the search keeps free for what the model misses

  std::string source;

  const timing_constants& timing_for(framework_kind f) const { return timing[static_cast<std::size_t>(f)]; }
  timing_constants& timing_for(framework_kind f) { return timing[static_cast<std::size_t>(f)]; }
};

}  // namespace trainplan
