// What a GPU without measurements of its own takes from calibration.json's reference GPU (catalog.hpp,
// calibration_for): the reference's time constants and, on its compute capability, its CUDA context; GEMM
// efficiencies scaled by the two GPUs' achievable matmul fractions.
#include <algorithm>

#include "planner/io/catalog.hpp"

namespace trainplan {

calibration catalog::calibration_for(const gpu_spec& gpu) const {
  auto entry_of = [&](std::string_view gpu_name) -> const calibration* {
    for (const auto& [name, entry] : gpu_calibration_)
      if (name == gpu_name) return &entry;
    return nullptr;
  };
  const calibration* own = entry_of(gpu.name);
  calibration c = own ? *own : default_calibration_;
  const calibration* reference = reference_gpu_ == gpu.name ? nullptr : entry_of(reference_gpu_);
  if (!reference) return c;
  // What the reference GPU's own entry measured and this GPU's does not: its timing constants (efficiencies are
  // fractions of each GPU's own datasheet peaks and bandwidth, so the roofline's compute- and memory-bound times
  // scale by the datasheets' ratios; the host's costs per kernel and step carry over as they are), and its CUDA
  // contexts where both GPUs have the same compute capability (the same kernel images loaded).
  const auto ref_gpu = std::find_if(gpus_.begin(), gpus_.end(), [&](const gpu_spec& g) { return g.name == reference_gpu_; });
  const bool same_architecture =
      ref_gpu != gpus_.end() && gpu.capability.known() && gpu.capability == ref_gpu->capability;
  for (const stack_calibration& r : reference->stacks) {
    const bool timing = r.timing_origin == calibration_origin::measured;
    const bool context = same_architecture && r.cuda_context_bytes && r.context_origin == calibration_origin::measured;
    if (!timing && !context) continue;
    stack_calibration& s = c.stack(r.name);
    if (timing && s.timing_origin != calibration_origin::measured) {
      s.timing = r.timing;
      s.timing_origin = calibration_origin::derived;
      c.derived_from = reference_gpu_;
    }
    if (context && !(s.cuda_context_bytes && s.context_origin == calibration_origin::measured)) {
      s.cuda_context_bytes = r.cuda_context_bytes;
      s.context_origin = calibration_origin::derived;
      c.derived_from = reference_gpu_;
    }
  }
  // The time constants are fractions of the datasheet peaks, and a datasheet peak is not what a GPU reaches: the
  // largest GEMMs reach 86.9% of it on an A100 and 80.3% on an H100 (gpu_spec::matmul_achievable_fraction). So a
  // GEMM efficiency seen on the reference GPU (its own measurement, or the default entry's figure, checked
  // there) is, on this GPU, that efficiency times the ratio of the two fractions. Tensor-core GEMMs only: fp32
  // GEMMs, attention kernels and bandwidth keep their fractions (no comparable measurement).
  if (ref_gpu != gpus_.end() && gpu.matmul_achievable_fraction > 0 && ref_gpu->matmul_achievable_fraction > 0 &&
      ref_gpu->name != gpu.name) {
    c.matmul_scale = gpu.matmul_achievable_fraction / ref_gpu->matmul_achievable_fraction;
    auto scale = [&](timing_constants& t) { t.gemm_efficiency = std::min(1.0, t.gemm_efficiency * c.matmul_scale); };
    for (stack_calibration& s : c.stacks)
      if (s.timing_origin != calibration_origin::measured) scale(s.timing);
  }
  return c;
}

}  // namespace trainplan
