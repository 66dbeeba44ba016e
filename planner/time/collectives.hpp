#pragma once
// The time of one NCCL collective on a cluster preset: NCCL's latency plus the bytes over the bus bandwidth the
// links allow, measured inside a node and derived from the NICs' line rate between nodes. docs/communication.md
// derives the model and lists its errors against every measured run in data/clusters.json.
#include <cstdint>
#include <optional>

#include "planner/system/cluster.hpp"
#include "planner/system/collective.hpp"
#include "planner/time/nccl_latency.hpp"

namespace trainplan {

// A communicator's ranks, spread evenly over `nodes`: ranks / nodes GPUs of each node (at most the preset's
// GPUs per node). A tensor-parallel group of 2 inside a node is {2, 1}; a data-parallel group of one GPU per node
// over 8 nodes is {8, 8}; a pipeline send to the next node is {2, 2}.
struct group_placement {
  std::uint64_t ranks = 1, nodes = 1;
};

struct collective_estimate {
  double seconds = 0;
  double bus_gbytes_per_s = 0;  // nccl-tests' busbw of that time: bytes x bus_factor / seconds (0 for one rank)
  comm_algorithm algorithm = comm_algorithm::ring;  // what the model takes NCCL to pick
  // The protocol of the latency charged; nullopt where a measured intra-node time stands alone (it holds
  // whichever protocols NCCL ran).
  std::optional<comm_protocol> protocol;
  // The intra-node part interpolates a measured sweep; false: line rate x the link kind's efficiency (no
  // measurement for this preset, or a collective none was measured for: all-to-all, send/recv).
  bool measured = false;
};

// The time of collective c of `bytes` (nccl-tests' size: the all-reduce buffer; the whole gathered output or
// scattered input; one rank's all-to-all send buffer; the send/recv message) on `group`. 0 for one rank or no
// bytes. Throws input_error for a placement the preset cannot hold (more ranks per node than it has GPUs, ranks
// that do not spread evenly, several nodes of a preset without a network, send/recv between other than 2 ranks).
collective_estimate estimate_collective(const cluster_spec& cluster, collective c, double bytes, const group_placement& group);
double collective_seconds(const cluster_spec& cluster, collective c, double bytes, const group_placement& group);

// Whether NCCL may run collective c of `group` on NVLink SHARP: an all-reduce on a preset with NVLS, with more
// than 4 of the group's ranks in each node (NVLS inside one node; NVLS tree between nodes). Its buffers are then
// part of the communicator's memory (planner/time/nccl_resources.hpp).
bool uses_nvls(const cluster_spec& cluster, collective c, const group_placement& group);

}  // namespace trainplan
