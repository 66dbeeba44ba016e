#pragma once
// Constants a real GPU run shows and an analytic model cannot derive (data/calibration.json): what any CUDA
// program holds, and each training stack's own constants, keyed by the stack's profile name.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/system/timing_constants.hpp"

namespace trainplan {

// Where a stack's constants on a GPU come from (`plan gpus` and the report's assumptions say which).
enum class calibration_origin {
  fallback,  // data/calibration.json's default entry: literature values, or a figure its source says was measured elsewhere
  measured,  // the GPU's own entry ("gpus": {"<gpu>": ...}, what `plan calibrate` fits from runs on that GPU)
  derived,   // the reference GPU's own entry ("reference_gpu"; catalog::calibration_for): its timing constants, which
             // are fractions of a GPU's datasheet peaks and bandwidth or host costs, so the roofline's times scale by
             // the two datasheets' ratios; its CUDA context only where both GPUs share a compute capability
};

// One training stack's constants on a GPU ("profiles": {"<name>": {...}} in data/calibration.json). Which keys a
// stack reads is its profile's (planner/profiles/profile.hpp, calibration_keys).
struct stack_calibration {
  std::string name;                                // the profile's name
  std::optional<std::uint64_t> cuda_context_bytes; // its process's CUDA context: device bytes in use after CUDA
                                                   // initialisation less the allocator's reserved bytes
  std::optional<double> allocator_slack_fraction;  // its caching allocator's unused cache, x tensor peak
  timing_constants timing;                         // the step-time model's constants (planner/time/roofline.hpp)
  calibration_origin timing_origin = calibration_origin::fallback;
  calibration_origin context_origin = calibration_origin::fallback;  // of cuda_context_bytes (absent: fallback)
};

struct calibration {
  std::uint64_t cuda_context_bytes = 0;      // CUDA context and loaded kernels of a CUDA program (literature)
  std::uint64_t cublas_workspace_bytes = 0;  // cuBLAS(Lt) workspace of one handle
  double allocator_slack_fraction = 0;       // a caching allocator's rounding and fragmentation, x tensor peak
  double safety_margin_fraction = 0;         // memory the search keeps free for what the model misses
  std::vector<stack_calibration> stacks;     // by profile name
  std::string source;
  // The GPU whose own entry filled in what this GPU's lacks (origin derived); empty: none did.
  std::string derived_from;
  // Where a stack's time constants were not measured on this GPU (derived or default), its GEMM efficiency is the
  // reference GPU's times this: the GPU's achievable matmul fraction over the reference GPU's (gpu_spec); 1 where
  // either is unknown (catalog::calibration_for).
  double matmul_scale = 1;

  const stack_calibration* stack(std::string_view name) const {
    for (const stack_calibration& s : stacks)
      if (s.name == name) return &s;
    return nullptr;
  }
  stack_calibration& stack(std::string_view name) {  // made (with default timing) when absent
    for (stack_calibration& s : stacks)
      if (s.name == name) return s;
    stack_calibration& added = stacks.emplace_back();
    added.name = std::string(name);
    return added;
  }
  // The stack's own measurement where there is one, else what any CUDA program holds.
  std::uint64_t context_bytes(std::string_view name) const {
    const stack_calibration* s = stack(name);
    return s && s->cuda_context_bytes ? *s->cuda_context_bytes : cuda_context_bytes;
  }
  double slack_fraction(std::string_view name) const {
    const stack_calibration* s = stack(name);
    return s && s->allocator_slack_fraction ? *s->allocator_slack_fraction : allocator_slack_fraction;
  }
  calibration_origin timing_origin(std::string_view name) const {
    const stack_calibration* s = stack(name);
    return s ? s->timing_origin : calibration_origin::fallback;
  }
  calibration_origin context_origin(std::string_view name) const {
    const stack_calibration* s = stack(name);
    return s && s->cuda_context_bytes ? s->context_origin : calibration_origin::fallback;
  }
  // The stack's timing constants (data/calibration.json's default entry holds every registered stack's).
  const timing_constants& timing(std::string_view name) const {
    static const timing_constants defaults;
    const stack_calibration* s = stack(name);
    return s ? s->timing : defaults;
  }
};

}  // namespace trainplan
