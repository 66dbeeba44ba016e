#pragma once
// Expected step time, throughput and utilization.
#include <cstdint>

#include "planner/calibration.hpp"
#include "planner/flops.hpp"
#include "planner/gpu_spec.hpp"

namespace trainplan {

struct step_time {
  double peak_flops_per_s = 0;     // dense peak for the compute dtype
  double efficiency = 0;           // achieved fraction of peak at this GEMM size (calibration)
  double compute_seconds = 0;      // hardware FLOPs / (peak * efficiency)
  double optimizer_seconds = 0;    // optimizer traffic / memory bandwidth (the update is memory-bound)
  double offload_seconds = 0;      // PCIe transfers of offloaded state (not overlapped with compute)
  double step_seconds = 0;
  double tokens_per_second = 0;
  double mfu = 0;                  // model FLOPs / (step time * peak)      (Chowdhery et al. 2022, App. B)
  double hfu = 0;                  // hardware FLOPs / (step time * peak)
};

// optimizer_traffic_bytes: bytes the optimizer step reads and writes once per step.
// flops are one data-parallel replica's, shared by its gpus_per_replica (tp x pp) GPUs; dp replicas run in
// parallel. A pipeline idles for bubble_fraction = (pp - 1) / micro-batches of the compute time
// (Narayanan et al. 2021, Sec. 2.2, 1F1B).
// tokens_per_micro_batch sets the GEMM size the calibrated efficiency depends on. Communication between
// GPUs is not modelled: the time is what the GPUs compute, plus the optimizer and offload transfers.
step_time estimate_step_time(const step_flops& flops, double peak_flops_per_s, const gpu_spec& gpu,
                             const calibration& calib, std::uint64_t optimizer_traffic_bytes,
                             double tokens_per_micro_batch, std::uint64_t gpus_per_replica = 1, std::uint64_t dp = 1,
                             double offload_seconds = 0, double bubble_fraction = 0);

}  // namespace trainplan
