#include "planner/time/collectives.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "planner/time/busbw_curve.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {
namespace {

constexpr double infinite = std::numeric_limits<double>::infinity();

// NVLS runs for more than 4 GPUs of a node: on 8x H200 NCCL stays on the ring at 4 GPUs and picks NVLS from 5
// (stas00/ml-engineering network/README.md @744d01e1 lines 923-929), and forced NVLS is no faster than the ring
// up to 4 GPUs on 8x H100 (NVIDIA/nccl#1455). (p6-b200 switched at 6 under AWS's tuner plugin, same table lines
// 933-941: the model's NVLS at 5 B200 GPUs is its error there.)
constexpr std::uint64_t nvls_min_local_ranks = 5;

// NCCL's Ring LL bus bandwidth is half the ring's (tuning.cc line 327: LL moves a flag with every 8 bytes), and
// Tree LL's a 3.8th (line 332), each capped by llMaxBw.
constexpr double ring_ll_bandwidth_fraction = 0.5;
constexpr double tree_ll_bandwidth_fraction = 1 / 3.8;

bool is_nvlink(const cluster_spec& c) {
  return c.intra.kind == intra_link::nvlink3 || c.intra.kind == intra_link::nvlink4 || c.intra.kind == intra_link::nvlink5;
}

// The effective bus bandwidth of the group's ranks inside one node at a message size, latency included:
// bytes x factor / the time one node alone would take. Infinite for one rank per node (no intra-node part).
struct intra_part {
  double gbytes_per_s = infinite;
  bool measured = false;
  std::optional<comm_protocol> protocol;  // set where the line-rate model chose one
};

// A ring's busbw at large messages inside the node. On an NVSwitch a ring's busbw is each GPU's link rate
// whatever the number of GPUs (each rank sends 2(r-1)/r of the buffer over its own links; busbw divides that
// out): ~365-370 GB/s on 2 to 8 H100s (NVIDIA/nccl#1455) and 363-366 GB/s on 4 to 8 H200s (ml-engineering lines
// 923-929). So a ring figure measured at any GPU count stands for all; all-gather and reduce-scatter take their
// own where measured. Else the line rate x the link kind's ring efficiency (data/clusters.json link_kinds).
double ring_plateau(const cluster_spec& c, collective coll) {
  if (coll == collective::all_gather || coll == collective::reduce_scatter) {
    if (const auto v = c.intra_large_message_gbytes_per_s(coll, nccl_algorithm::ring)) return *v;
    if (const auto v = c.intra_large_message_gbytes_per_s(coll, nccl_algorithm::nccl_default)) return *v;
  }
  if (const auto v = c.intra_large_message_gbytes_per_s(collective::all_reduce, nccl_algorithm::ring)) return *v;
  return c.ring_gbytes_per_s_from_line();
}

// Where nothing was measured: alpha + bytes x factor / plateau, with NCCL's latency for the algorithm, and of LL
// and Simple the protocol NCCL would pick, the faster (NCCL's own choice, ncclTopoGetAlgoTime: the least time).
intra_part line_rate_part(const cluster_spec& c, collective coll, comm_algorithm a, std::uint64_t r, double bytes,
                          double plateau_gbytes_per_s) {
  const double bus_bytes = bytes * bus_factor(coll, r);
  const bool nvlink = is_nvlink(c);
  intra_part best{0, false, std::nullopt};
  double best_seconds = infinite;
  for (const comm_protocol p : {comm_protocol::ll, comm_protocol::simple}) {
    if ((a == comm_algorithm::nvls || a == comm_algorithm::p2p) && p == comm_protocol::ll) continue;  // NVLS: Simple only
    const double bw = p == comm_protocol::ll
                          ? std::min(ring_ll_bandwidth_fraction * plateau_gbytes_per_s, nccl_ll_max_gbytes_per_s(c.intra.spec.generation, 1))
                          : plateau_gbytes_per_s;
    const double seconds = nccl_latency_us(a, p, coll, r, 1, nvlink) * 1e-6 + bus_bytes / (bw * 1e9);
    if (seconds < best_seconds) best_seconds = seconds, best.protocol = p;
  }
  best.gbytes_per_s = bus_bytes / best_seconds / 1e9;
  return best;
}

// A ring (or NVLink peer-to-peer) among r ranks of one node.
intra_part ring_part(const cluster_spec& c, collective coll, std::uint64_t r, double bytes) {
  if (r <= 1) return {};
  if (coll == collective::all_to_all || coll == collective::send_recv)
    return line_rate_part(c, coll, comm_algorithm::p2p, r, bytes, ring_plateau(c, collective::all_reduce));
  const double plateau = ring_plateau(c, coll);
  if (const measured_series* sweep = c.intra_sweep()) {
    double b = interpolated_bus_gbytes_per_s(sweep->points, bytes);
    // On an NVLS node the sweep runs NVLS at large sizes, which a ring does not reach: the ring's plateau caps it.
    // Where the node has no NVLS the sweep is ring and tree already. All-gather and reduce-scatter follow the
    // all-reduce sweep: in a ring their latency (n-1 steps against 2(n-1), tuning.cc lines 289-291) and their bytes
    // ((n-1)/n against 2(n-1)/n) are both half an all-reduce's, so at one size their busbw is the all-reduce's.
    if (c.intra.nvls || coll != collective::all_reduce) b = std::min(b, plateau);
    return {b, true, std::nullopt};
  }
  return line_rate_part(c, coll, comm_algorithm::ring, r, bytes, plateau);
}

// NVLS among r ranks of one node. Each rank pushes its buffer into the switch, which reduces it, and pulls the
// result back: S bytes each way over each GPU's links whatever the GPU count, so the time (algbw) holds and
// busbw = algbw x 2(r-1)/r grows with (r-1)/r. From the sweep on all G GPUs: b(r) = b(G) x [(r-1)/r]/[(G-1)/G],
// i.e. the sweep's time at every size (H200: 463 predicted against 460 measured at 7 GPUs, 432 against 414 at 5;
// ml-engineering lines 923-929).
intra_part nvls_part(const cluster_spec& c, std::uint64_t r, double bytes) {
  const double g = static_cast<double>(c.gpus_per_node), n = static_cast<double>(r);
  const double scale = ((n - 1) / n) / ((g - 1) / g);
  if (const measured_series* sweep = c.intra_sweep())
    return {interpolated_bus_gbytes_per_s(sweep->points, bytes) * scale, true, std::nullopt};
  const double plateau = c.intra.spec.nvls_efficiency * c.intra.gbytes_per_s_per_gpu * scale;
  return line_rate_part(c, collective::all_reduce, comm_algorithm::nvls, r, bytes, plateau);
}

void check_placement(const cluster_spec& c, collective coll, double bytes, const group_placement& g) {
  if (!(bytes >= 0) || !std::isfinite(bytes)) throw input_error(fmt::format("{}: {} bytes is not a size", collective_name(coll), bytes));
  if (g.ranks == 0 || g.nodes == 0 || g.ranks % g.nodes != 0)
    throw input_error(fmt::format("{} ranks do not spread evenly over {} nodes", g.ranks, g.nodes));
  if (g.ranks / g.nodes > c.gpus_per_node)
    throw input_error(fmt::format("{} ranks on {} nodes: {} a node, but a {} node holds {} GPUs", g.ranks, g.nodes,
                                  g.ranks / g.nodes, c.name, c.gpus_per_node));
  if (g.nodes > 1 && !c.has_network())
    throw input_error(fmt::format("cluster {} has no network between nodes: one node only", c.name));
  if (coll == collective::send_recv && g.ranks != 2)
    throw input_error(fmt::format("send_recv is between 2 ranks, not {}", g.ranks));
}

struct candidate {
  comm_algorithm algorithm;
  comm_protocol protocol;
  intra_part intra;
  double network_gbytes_per_s;  // the network's cap on the busbw
  double latency_us;            // what the network adds to the intra-node time
};

}  // namespace

bool uses_nvls(const cluster_spec& c, collective coll, const group_placement& g) {
  return coll == collective::all_reduce && c.intra.nvls && g.nodes > 0 && g.ranks / g.nodes >= nvls_min_local_ranks;
}

namespace {

// The model's time, before a cluster's fitted factors (estimate_collective applies them).
collective_estimate model_estimate(const cluster_spec& c, collective coll, double bytes, const group_placement& g) {
  check_placement(c, coll, bytes, g);
  collective_estimate e;
  if (g.ranks <= 1 || bytes == 0) return e;
  const std::uint64_t r = g.ranks / g.nodes;
  const double f = bus_factor(coll, g.ranks);
  const double bus_bytes = bytes * f;
  const bool nvls = uses_nvls(c, coll, g);

  if (g.nodes == 1) {
    const intra_part part = nvls ? nvls_part(c, r, bytes) : ring_part(c, coll, r, bytes);
    e.seconds = bus_bytes / (part.gbytes_per_s * 1e9);
    e.algorithm = nvls ? comm_algorithm::nvls
                       : coll == collective::all_to_all || coll == collective::send_recv ? comm_algorithm::p2p : comm_algorithm::ring;
    e.protocol = part.protocol;
    e.measured = part.measured;
    e.bus_gbytes_per_s = part.gbytes_per_s;
    return e;
  }

  // Across nodes. The r ranks of a node reach the other nodes through their share of its NICs, r/G of them: in a
  // ring each node passes the whole collective's traffic once across its boundary, f x S bytes (NCCL spreads its
  // channels over the NICs near their GPUs), and the node's other GPUs run their own groups' collectives through
  // the rest at the same time (a data-parallel group per tensor-parallel rank). So
  //   busbw <= efficiency x NICs x rate x r / G,
  // the efficiency being the fabric's (data/clusters.json fabrics). The intra-node time of the same message,
  // measured where it can be, caps it too; the latency NCCL's model adds for the network hops is added to it.
  const double g_node = static_cast<double>(c.gpus_per_node);
  const double nic_share = c.inter.spec.efficiency * c.inter.node_gbytes_per_s() * static_cast<double>(r) / g_node;
  const bool nvlink = is_nvlink(c);
  std::vector<candidate> candidates;
  // The latency the network adds: NCCL's latency for the placement less its latency for the node's r ranks alone,
  // which the intra-node time holds already (all of it where each node holds one rank).
  auto added_us = [&](comm_algorithm a, comm_protocol p, comm_algorithm a_one_node) {
    const double one_node = r > 1 ? nccl_latency_us(a_one_node, p, coll, r, 1, nvlink) : 0.0;
    return std::max(0.0, nccl_latency_us(a, p, coll, g.ranks, g.nodes, nvlink) - one_node);
  };
  const double ll_cap = nccl_ll_max_gbytes_per_s(c.intra.spec.generation, g.nodes);
  switch (coll) {
    case collective::all_reduce: {
      // On exactly two nodes NCCL runs trees (or NVLS trees), not rings: with two nodes each node is the root of
      // one of the two trees and a leaf of the other, so it sends the other node S/2 up and S/2 down, S in all,
      // where a ring sends 2(n-1)/n x S. The busbw nccl-tests reports (over 2(n-1)/n) can then pass the NIC rate
      // (NVIDIA/nccl-tests#196; 1.2-1.7x on every 2-node table in data/clusters.json). From 3 nodes a tree node
      // sends 2S like a ring (an inner node of one tree: S/2 up, S down to two children; a leaf of the other: S/2).
      const double tree_factor = g.nodes == 2 ? f : 1.0;
      const intra_part ring_intra = ring_part(c, coll, r, bytes);
      for (const comm_protocol p : {comm_protocol::ll, comm_protocol::simple}) {
        const bool ll = p == comm_protocol::ll;
        candidates.push_back({comm_algorithm::ring, p, ring_intra,
                              ll ? std::min(ring_ll_bandwidth_fraction * nic_share, ll_cap) : nic_share,
                              added_us(comm_algorithm::ring, p, comm_algorithm::ring)});
        candidates.push_back({comm_algorithm::tree, p, ring_intra,
                              ll ? std::min(tree_ll_bandwidth_fraction * nic_share * tree_factor, ll_cap) : nic_share * tree_factor,
                              added_us(comm_algorithm::tree, p, comm_algorithm::tree)});
      }
      if (nvls)
        candidates.push_back({comm_algorithm::nvls_tree, comm_protocol::simple, nvls_part(c, r, bytes), nic_share * tree_factor,
                              added_us(comm_algorithm::nvls_tree, comm_protocol::simple, comm_algorithm::nvls)});
      break;
    }
    case collective::all_gather:
    case collective::reduce_scatter: {
      const intra_part ring_intra = ring_part(c, coll, r, bytes);
      for (const comm_protocol p : {comm_protocol::ll, comm_protocol::simple})
        candidates.push_back({comm_algorithm::ring, p, ring_intra,
                              p == comm_protocol::ll ? std::min(ring_ll_bandwidth_fraction * nic_share, ll_cap) : nic_share,
                              added_us(comm_algorithm::ring, p, comm_algorithm::ring)});
      break;
    }
    case collective::all_to_all: {
      // Each rank sends S/n to every other rank: (n-r)/n x S leaves the node through the rank's own share of the
      // NICs (all-to-all cannot pool a node's NICs for one GPU: about one NIC per GPU, NVIDIA/nccl-tests#267),
      // (r-1)/n x S goes over NVLink at the ring's rate, both at once. As busbw (over (n-1)/n x S):
      //   network: efficiency x NICs x rate / G x (n-1)/(n-r);  NVLink: ring plateau x (n-1)/(r-1).
      const double n = static_cast<double>(g.ranks), rr = static_cast<double>(r);
      const double per_gpu = c.inter.spec.efficiency * c.inter.node_gbytes_per_s() / g_node;
      intra_part nvlink_part;
      if (r > 1) nvlink_part.gbytes_per_s = ring_plateau(c, collective::all_reduce) * (n - 1) / (rr - 1);
      candidates.push_back({comm_algorithm::p2p, comm_protocol::simple, nvlink_part, per_gpu * (n - 1) / (n - rr),
                            nccl_latency_us(comm_algorithm::p2p, comm_protocol::ll, coll, g.ranks, g.nodes, nvlink)});
      break;
    }
    case collective::send_recv:
      // One GPU to one GPU on another node: that GPU's share of its node's NICs.
      candidates.push_back({comm_algorithm::p2p, comm_protocol::simple, intra_part{},
                            c.inter.spec.efficiency * c.inter.node_gbytes_per_s() / g_node,
                            nccl_latency_us(comm_algorithm::p2p, comm_protocol::ll, coll, g.ranks, g.nodes, nvlink)});
      break;
  }
  double best = infinite;
  for (const candidate& k : candidates) {
    const double bw = std::min(k.intra.gbytes_per_s, k.network_gbytes_per_s);
    const double seconds = k.latency_us * 1e-6 + bus_bytes / (bw * 1e9);
    if (seconds < best) {
      best = seconds;
      e.seconds = seconds;
      e.algorithm = k.algorithm;
      e.protocol = k.protocol;
      e.measured = r > 1 && k.intra.measured;
    }
  }
  e.bus_gbytes_per_s = bus_bytes / e.seconds / 1e9;
  return e;
}

}  // namespace

// A cluster measured with the collector (plan calibrate --cluster-from) scales the effective bus bandwidth of each
// collective at each scope it fitted: the time over the factor, latency and bandwidth alike.
collective_estimate estimate_collective(const cluster_spec& c, collective coll, double bytes, const group_placement& g) {
  collective_estimate e = model_estimate(c, coll, bytes, g);
  const double factor = c.fitted_factor(coll, g.nodes > 1 ? link_scope::inter_node : link_scope::intra_node);
  if (e.seconds > 0 && factor != 1) {
    e.seconds /= factor;
    e.bus_gbytes_per_s *= factor;
  }
  return e;
}

double collective_seconds(const cluster_spec& c, collective coll, double bytes, const group_placement& g) {
  return estimate_collective(c, coll, bytes, g).seconds;
}

}  // namespace trainplan
