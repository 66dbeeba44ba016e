#pragma once
// Expected step time, throughput and utilization, from the step's operations (planner/time/step_ops.hpp) on the
// per-op roofline (planner/time/roofline.hpp).
#include <cstdint>

#include "planner/time/communication.hpp"
#include "planner/time/flops.hpp"
#include "planner/time/roofline.hpp"
#include "planner/time/step_ops.hpp"

namespace trainplan {

struct step_time {
  double peak_flops_per_s = 0;     // dense peak for the compute dtype
  op_time_breakdown breakdown;     // one GPU's step by op class (the pipeline bubble not included)
  double compute_seconds = 0;      // every op but the optimizer, with launches, host work and the bubble
  double optimizer_seconds = 0;    // the optimizer step's ops
  double offload_seconds = 0;      // PCIe transfers of offloaded state (not overlapped with compute)
  // Collectives between GPUs (planner/time/communication.hpp): the exposed part and the slowdown of the compute
  // the hidden part shares the SMs with are in step_seconds. Not modelled (all zero) without a cluster.
  comm_time communication;
  bool communication_modelled = false;
  double step_seconds = 0;
  double tokens_per_second = 0;
  double mfu = 0;                  // model FLOPs / (step time * peak)      (Chowdhery et al. 2022, App. B)
  double hfu = 0;                  // hardware FLOPs / (step time * peak)
};

// ops are one GPU's (planner/time/step_ops.hpp: a pipeline stage's layers, a tensor-parallel share of each).
// flops are one data-parallel replica's, shared by its gpus_per_replica (tp x cp x pp) GPUs, for MFU and HFU;
// dp replicas run in parallel. A pipeline idles for bubble_fraction = (pp - 1) / micro-batches of the
// compute time (Narayanan et al. 2021, Sec. 2.2, 1F1B). `communication`: the step's collectives overlapped
// with its compute (overlap_communication), added after the compute; nullptr: not modelled.
step_time estimate_step_time(const step_flops& flops, const step_ops& ops, double peak_flops_per_s,
                             double bandwidth_bytes_per_s, const timing_constants& constants,
                             std::uint64_t gpus_per_replica = 1, std::uint64_t dp = 1, double offload_seconds = 0,
                             double bubble_fraction = 0, const comm_time* communication = nullptr);

}  // namespace trainplan
