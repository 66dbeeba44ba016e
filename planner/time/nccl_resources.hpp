#pragma once
// What NCCL itself takes from each GPU for a communicator: device memory for its connection buffers, and the SMs
// its kernels hold while a collective runs, which the compute overlapped with it does not get.
#include <cstdint>

#include "planner/system/cluster.hpp"
#include "planner/system/collective.hpp"
#include "planner/time/collectives.hpp"

namespace trainplan {

// Bytes of device memory one rank of the communicator holds for its collectives' connections: 12 MiB per ring
// channel (a receive buffer for NCCL's three protocols and a send structure), the same again for the trees NCCL
// connects across nodes, and with `nvls` the NVLS buffers (uses_nvls says when NCCL sets them up). Channels:
// link_kinds' NCCL channels in one node, two per NIC across nodes. NCCL connects an algorithm the first time it
// runs (NCCL_RUNTIME_CONNECT, on by default), so a communicator that never runs a collective holds none of this.
double nccl_buffer_bytes(const cluster_spec& cluster, const group_placement& group, bool nvls);

// Bytes one rank holds beyond that for send/recv and all-to-all with every other rank of its node: 12 MiB per
// peer per point-to-point channel. Network peers share one pool, small beside these, which is not counted.
double nccl_p2p_buffer_bytes(const cluster_spec& cluster, const group_placement& group);

// The thread blocks (CTAs) NCCL's kernel launches for collective c on `group` at large messages, one per channel.
std::uint32_t nccl_ctas(const cluster_spec& cluster, collective c, const group_placement& group);

// The fraction of the GPU's `sm_count` SMs NCCL's kernel holds while collective c runs: each CTA holds an SM to
// itself (NCCL's blocks do not share an SM with other kernels: NVIDIA/nccl#689, sjeaugey), so compute running
// beside it gets the rest. Throws input_error when sm_count is 0 (gpus.json gives no sm_count for the GPU).
double nccl_sm_fraction(const cluster_spec& cluster, collective c, const group_placement& group, std::uint32_t sm_count);

}  // namespace trainplan
