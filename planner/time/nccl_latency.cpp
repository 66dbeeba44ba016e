#include "planner/time/nccl_latency.hpp"

#include <cmath>
#include <stdexcept>

#include "planner/util/names.hpp"

namespace trainplan {
namespace {

constexpr named<comm_algorithm> algorithm_names[] = {
    {comm_algorithm::ring, "ring"}, {comm_algorithm::tree, "tree"}, {comm_algorithm::nvls, "nvls"},
    {comm_algorithm::nvls_tree, "nvls_tree"}, {comm_algorithm::p2p, "p2p"},
};
constexpr named<comm_protocol> protocol_names[] = {{comm_protocol::ll, "LL"}, {comm_protocol::simple, "Simple"}};

// ncclTunerConstantsDefaults (NVIDIA/nccl @5067397c src/graph/tuning.cc lines 148-212), in microseconds, by
// protocol {LL, Simple}. Base latencies per call:
constexpr double base_ring_us[] = {6.6, 8.4};
constexpr double base_tree_us[] = {6.8, 8.4};
// Hardware latencies per hop:
constexpr double nvlink_ring_us[] = {0.6, 3.4};
constexpr double nvlink_tree_us[] = {0.6, 4.0};
constexpr double pci_ring_us[] = {1.0, 5.7};
constexpr double pci_tree_us[] = {1.0, 4.0};
constexpr double net_ring_us[] = {2.7, 14.0};
constexpr double net_tree_us[] = {5.0, 14.0};
constexpr double nvlink_nvls_us = 25.0;   // NVLS and NVLS tree, the NVLink part (Simple)
constexpr double net_nvls_tree_us = 20.9; // NVLS tree, the network part (Simple)
// getNetOverhead (lines 226-233): 1 us per inter-node ring step on an Intel-like host, x3 for Simple (line 406).
constexpr double net_overhead_us = 1.0;
constexpr double net_overhead_simple_factor = 3.0;
// ncclTopoGetAlgoTime (lines 647-650): Ring Simple all-reduce across nodes, on Ampere and later, takes its latency
// x1.4 once a channel carries 64 bytes or more per rank, which every message beyond a few kilobytes does.
constexpr double ring_simple_multi_node_factor = 1.4;
// llMaxBws (lines 177-183): one node by generation (Ampere, Hopper, Blackwell); across nodes the Intel-like row.
constexpr double ll_max_one_node[] = {87.7, 141.0, 2 * 141.0};
constexpr double ll_max_two_nodes = 39.0;
constexpr double ll_max_more_nodes = 20.4;

int index_of(comm_protocol p) { return p == comm_protocol::ll ? 0 : 1; }

// NCCL's log2i: the floor of log2.
double log2_floor(std::uint64_t n) { return std::floor(std::log2(static_cast<double>(n))); }

}  // namespace

std::string_view comm_algorithm_name(comm_algorithm a) { return name_of(algorithm_names, a); }
std::string_view comm_protocol_name(comm_protocol p) { return name_of(protocol_names, p); }

double nccl_latency_us(comm_algorithm a, comm_protocol p, collective c, std::uint64_t ranks, std::uint64_t nodes, bool nvlink) {
  if (ranks <= 1) return 0;
  const int i = index_of(p);
  const double local_ranks = static_cast<double>(ranks / nodes);
  switch (a) {
    case comm_algorithm::p2p: {
      const double hop = nodes > 1 ? net_ring_us[0] : nvlink ? nvlink_ring_us[0] : pci_ring_us[0];
      return base_ring_us[0] + hop;
    }
    case comm_algorithm::ring: {
      if (c != collective::all_reduce && c != collective::all_gather && c != collective::reduce_scatter)
        throw std::invalid_argument("nccl_latency_us: ring runs all-reduce, all-gather and reduce-scatter");
      // Lines 401-412: nsteps = 2(n-1) for all-reduce, n-1 otherwise; the steps that cross nodes pay the network's
      // latency (the tree's row where each node holds one rank), the others the link's, at least the network
      // overhead of posting a step.
      const double n = static_cast<double>(ranks);
      const double steps = c == collective::all_reduce ? 2 * (n - 1) : n - 1;
      const double inter_steps = nodes == 1 ? 0 : c == collective::all_reduce ? 2.0 * (nodes - 1) : nodes - 1.0;
      double intra = nvlink ? nvlink_ring_us[i] : pci_ring_us[i];
      if (nodes > 1) intra = std::max(intra, net_overhead_us * (p == comm_protocol::simple ? net_overhead_simple_factor : 1));
      const double inter = local_ranks == 1 ? net_tree_us[i] : net_ring_us[i];
      double latency = base_ring_us[i] + (steps - inter_steps) * intra + inter_steps * inter;
      if (nodes > 1 && p == comm_protocol::simple && c == collective::all_reduce) latency *= ring_simple_multi_node_factor;
      return latency;
    }
    case comm_algorithm::tree:
      if (c != collective::all_reduce) throw std::invalid_argument("nccl_latency_us: tree runs all-reduce only");
      // Line 416: up and down the chain inside the node, and log2(nodes) network hops each way.
      return base_tree_us[i] + 2 * ((local_ranks - 1) * (nvlink ? nvlink_tree_us[i] : pci_tree_us[i]) + log2_floor(nodes) * net_tree_us[i]);
    case comm_algorithm::nvls:
      if (c != collective::all_reduce || nodes != 1) throw std::invalid_argument("nccl_latency_us: NVLS is one node's all-reduce");
      return nvlink_nvls_us;  // lines 424-426: no base latency
    case comm_algorithm::nvls_tree:
      if (c != collective::all_reduce) throw std::invalid_argument("nccl_latency_us: NVLS tree runs all-reduce only");
      return nvlink_nvls_us + 2 * log2_floor(nodes) * net_nvls_tree_us;  // line 428
  }
  return 0;
}

double nccl_ll_max_gbytes_per_s(nccl_generation g, std::uint64_t nodes) {
  if (nodes <= 1) return ll_max_one_node[static_cast<int>(g)];
  return nodes == 2 ? ll_max_two_nodes : ll_max_more_nodes;
}

}  // namespace trainplan
