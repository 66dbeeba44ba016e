#include "planner/time/nccl_resources.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "planner/util/input_error.hpp"

namespace trainplan {
namespace {

constexpr double mib = 1024.0 * 1024.0;
// One directed connection per channel (research deepspeed_megatron_llmc_nccl.md section 5.1, from NVIDIA/nccl
// @5067397c src/init.cc lines 810-824 and src/transport/p2p.cc): the receiver holds all three protocols' buffers
// -- LL 512 KiB (8 lines x 512 threads x 8 steps x 16 B), LL128 4,915,200 B (120 x 640 x 8 x 8 B), Simple 4 MiB --
// 9.19 MiB rounded up to CUDA's 2 MiB IPC granule: 10 MiB (p2pRecvSetup, lines 486-491); the sender a 2 MiB
// structure (p2pSendSetup, lines 407-410). 8x H100 allocation logs show exactly 10,485,760 and 2,097,152 bytes per
// channel per peer (NVIDIA/nccl#1685). A network connection holds LL128 and Simple in device memory (~8.7 MiB,
// src/transport/net.cc lines 914-919), counted here as an NVLink one.
constexpr double connection_bytes = 12 * mib;
// ncclNvlsBufferSetup (src/transport/nvls.cc lines 409-437): channels x 2 x (NCCL_NVLS_CHUNKSIZE 128 KiB x
// NCCL_STEPS 8) per head, one head per GPU of the node: 256 MiB on 8 H100s.
constexpr double nvls_chunk_bytes = 128 * 1024.0;
constexpr double nccl_steps = 8;
// Across nodes NCCL runs two channels per NIC, to keep each NIC busy through a channel's pauses (sjeaugey,
// NVIDIA/nccl#438): 16 on a DGX with 8 NICs (NVIDIA/nccl#689).
constexpr std::uint32_t channels_per_nic = 2;
// Send/recv to a network peer: NCCL_NCHANNELS_PER_NET_PEER, 2 by default (NVIDIA/nccl#1424).
constexpr std::uint32_t channels_per_net_peer = 2;

std::uint64_t local_ranks(const group_placement& g) { return g.nodes ? g.ranks / g.nodes : 0; }

// Ring (and tree) channels: the link kind's count in one node; across nodes two per NIC of the group's share of
// the node's NICs (at least one NIC), no more than in one node.
std::uint32_t ring_channels(const cluster_spec& c, const group_placement& g) {
  const std::uint32_t one_node = c.intra.spec.nccl_ring_channels;
  if (g.nodes <= 1) return one_node;
  const double nics = std::max(1.0, std::round(c.inter.nics_per_node * static_cast<double>(local_ranks(g)) / c.gpus_per_node));
  return std::min(one_node, static_cast<std::uint32_t>(channels_per_nic * nics));
}

// Point-to-point channels: the ring's count rounded up to a power of two (ncclTopoComputeP2pChannels,
// src/graph/paths.cc lines 977-986): 32 on 8 H100s, as NVIDIA/nccl#1685 shows per peer.
std::uint32_t p2p_channels(const cluster_spec& c) { return std::bit_ceil(c.intra.spec.nccl_ring_channels); }

std::uint32_t nvls_channels(const cluster_spec& c, const group_placement& g) {
  return g.nodes > 1 ? c.intra.spec.nccl_nvls_channels_multi_node : c.intra.spec.nccl_nvls_channels;
}

}  // namespace

double nccl_buffer_bytes(const cluster_spec& c, const group_placement& g, bool nvls) {
  if (g.ranks <= 1) return 0;
  const double channels = ring_channels(c, g);
  double bytes = channels * connection_bytes;               // ring: one receive and one send connection per channel
  if (g.nodes > 1) bytes += channels * connection_bytes;    // trees across nodes: their own connections
  if (nvls) bytes += nvls_channels(c, g) * 2 * nvls_chunk_bytes * nccl_steps * static_cast<double>(local_ranks(g));
  return bytes;
}

double nccl_p2p_buffer_bytes(const cluster_spec& c, const group_placement& g) {
  const std::uint64_t r = local_ranks(g);
  if (r <= 1) return 0;
  return static_cast<double>(r - 1) * p2p_channels(c) * connection_bytes;
}

std::uint32_t nccl_ctas(const cluster_spec& c, collective coll, const group_placement& g) {
  if (g.ranks <= 1) return 0;
  switch (coll) {
    case collective::all_reduce:
      return uses_nvls(c, coll, g) ? nvls_channels(c, g) : ring_channels(c, g);
    case collective::all_gather:
    case collective::reduce_scatter:
      return ring_channels(c, g);
    case collective::all_to_all:
      return p2p_channels(c);
    case collective::send_recv:
      return g.nodes > 1 ? channels_per_net_peer : p2p_channels(c);
  }
  return 0;
}

double nccl_sm_fraction(const cluster_spec& c, collective coll, const group_placement& g, std::uint32_t sm_count) {
  if (sm_count == 0) throw input_error(fmt::format("the GPU's SM count is not known (gpus.json sm_count): NCCL's share of {}'s SMs", c.name));
  return std::min(1.0, static_cast<double>(nccl_ctas(c, coll, g)) / sm_count);
}

}  // namespace trainplan
