#pragma once
// A GPU as the planner sees it: memory capacity, dense peak throughput per dtype, bandwidths.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "planner/dtype.hpp"

namespace trainplan {

struct gpu_spec {
  std::string name;                     // "h100"
  std::vector<std::string> aliases;
  std::string description;              // "NVIDIA H100 SXM5 80GB HBM3"
  std::uint64_t memory_bytes = 0;       // total as the driver reports it
  double memory_bandwidth_bytes_per_s = 0;
  double host_link_bytes_per_s = 0;     // PCIe to the host, one direction
  std::map<dtype, double> peak_dense_tflops;  // absent: the GPU has no such mode
  std::string source;

  std::optional<double> peak_flops_per_s(dtype t) const {
    auto it = peak_dense_tflops.find(t);
    if (it == peak_dense_tflops.end()) return std::nullopt;
    return it->second * 1e12;
  }
};

}  // namespace trainplan
