#pragma once
// NCCL's own latency model (the alpha of a collective's alpha-beta time) and the protocol caps that go with it,
// from its tuner (src/graph/tuning.cc in NVIDIA/nccl 2.30.7): what NCCL charges an algorithm and protocol for
// one call, before the bytes.
#include <cstdint>
#include <string_view>

#include "planner/system/cluster.hpp"
#include "planner/system/collective.hpp"

namespace trainplan {

// ring and tree: NCCL's rings and (double binary) trees; nvls: NVLink SHARP in one node; nvls_tree: NVLS inside
// each node, a tree between nodes; p2p: point-to-point sends, as send/recv and all-to-all run.
enum class comm_algorithm { ring, tree, nvls, nvls_tree, p2p };
// ll: NCCL's low-latency protocol (8-byte stores with a flag: half the bandwidth, little latency); simple: bulk
// copies with a fence per step (NCCL's protocols; LL128, between the two, is not modelled).
enum class comm_protocol { ll, simple };

std::string_view comm_algorithm_name(comm_algorithm a);  // "nvls_tree"
std::string_view comm_protocol_name(comm_protocol p);    // "LL", "Simple"

// NCCL's latency in microseconds for collective c over `ranks` spread evenly over `nodes`, the GPUs of a node
// joined by NVLink (else PCIe). Ring, tree and the NVLS algorithms follow ncclTopoTuneModel (tuning.cc lines
// 384-435) with its default constants (lines 148-212), an Intel-like host (network overhead 1 us per ring step,
// lines 226-233) and no extra network latency from a plugin; NVLS and NVLS tree run Simple only. p2p is not in
// NCCL's tuner: one ring step of the LL protocol (base latency and one hop). Throws std::invalid_argument for an
// algorithm the collective does not run (tree or NVLS for all-gather).
double nccl_latency_us(comm_algorithm a, comm_protocol p, collective c, std::uint64_t ranks, std::uint64_t nodes, bool nvlink);

// The LL protocol's bus-bandwidth cap (GB/s), llMaxBw (tuning.cc lines 177-183, chosen at lines 266-272): by GPU
// generation in one node, by host CPU across nodes (Intel-like row: 2 nodes, 3 or more).
double nccl_ll_max_gbytes_per_s(nccl_generation g, std::uint64_t nodes);

}  // namespace trainplan
