#pragma once
// A GPU as the planner sees it: memory capacity, dense peak throughput per dtype, bandwidths.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "planner/system/cluster.hpp"
#include "planner/util/compute_capability.hpp"
#include "planner/util/dtype.hpp"

namespace trainplan {

// Where a GPU's memory_bytes comes from (gpus.json "memory_source").
enum class memory_source {
  measured,  // cudaMemGetInfo's total, measured by trainplan on that GPU
  reported,  // cudaMemGetInfo's total as PyTorch's out-of-memory message prints it (to 0.01 GiB), in a cited report
  estimate,  // nvidia-smi's or the datasheet's total, which exceeds cudaMemGetInfo's by a few hundred MiB
  unstated,  // a user's gpus.json that does not say
};

inline const char* memory_source_name(memory_source s) {
  switch (s) {
    case memory_source::measured: return "measured";
    case memory_source::reported: return "reported";
    case memory_source::estimate: return "estimate";
    case memory_source::unstated: return "unstated";
  }
  return "?";
}

struct gpu_spec {
  std::string name;                     // "h100"
  std::vector<std::string> aliases;
  std::string description;              // "NVIDIA H100 SXM5 80GB HBM3"
  // What CUDA calls it (cudaDeviceProp::name, torch.cuda.get_device_name): "NVIDIA H100 80GB HBM3". A collector
  // report's env line names its GPU so; plan check finds the entry by it.
  std::vector<std::string> device_names;
  std::uint64_t memory_bytes = 0;       // total as cudaMemGetInfo reports it (or an estimate: memory_from)
  memory_source memory_from = memory_source::unstated;
  compute_capability capability;        // {0, 0}: not known
  double memory_bandwidth_bytes_per_s = 0;
  double host_link_bytes_per_s = 0;     // PCIe to the host, one direction
  // By dtype (index: the dtype's value); empty: the GPU has no such mode. A fixed table, not a map:
  // plan_result keeps a copy of its GPU, made for every configuration of a sweep.
  std::array<std::optional<double>, dtype_count> peak_dense_tflops{};
  // The cluster preset (data/clusters.json) the GPU usually comes in, used when --cluster is not given; empty: none.
  std::string node;
  // The cluster a plan on this GPU runs on: the catalog attaches the usual node's preset (`node`); `plan --cluster`
  // or --gpus-per-node replaces it, its gpus_per_node the GPUs of each node the run uses. Null: none, and
  // communication is not modelled. Shared: sweeps copy a GPU into every configuration's result.
  std::shared_ptr<const cluster_spec> cluster;
  std::uint32_t sm_count = 0;           // streaming multiprocessors; 0: not known (NCCL's kernels take a share of them)
  // The largest bf16 GEMM rate measured on the GPU over its datasheet's dense bf16 peak (the "maximum achievable
  // matmul FLOPS" of stas00/ml-engineering, compute/accelerator: A100 SXM 86.9%, H100 SXM 80.3%): clocks under
  // power limits reach less of the datasheet on newer GPUs. 0: not known.
  double matmul_achievable_fraction = 0;
  std::string source;

  std::optional<double> peak_flops_per_s(dtype t) const {
    const std::optional<double>& tflops = peak_dense_tflops[static_cast<std::size_t>(t)];
    if (!tflops) return std::nullopt;
    return *tflops * 1e12;
  }
};

}  // namespace trainplan
