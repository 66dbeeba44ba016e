#pragma once
// A cluster preset: the GPUs of a node, the links between them inside the node and between nodes, and the NCCL
// bus bandwidth others measured on it, each figure with its source (data/clusters.json, loaded by
// planner/io/catalog). planner/time/collectives.hpp turns it into the time of a collective.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/system/collective.hpp"

namespace trainplan {

// The link between the GPUs of a node.
enum class intra_link { nvlink3, nvlink4, nvlink5, pcie4, pcie5 };
// The network between nodes (none: a single box).
enum class fabric { none, infiniband_hdr, infiniband_ndr, efa_v1, efa_v2, efa_v4, tcpx, tcpxo, roce, ethernet };
// Which row of NCCL's tuning tables the GPUs take (src/graph/tuning.cc: compute capability 8.x, 9.x, 10.x).
enum class nccl_generation { ampere, hopper, blackwell };
// The algorithm a measured run used; nccl_default: NCCL's own choice, not recorded per message size.
enum class nccl_algorithm { nccl_default, ring, tree, nvls, collnet_chain };
enum class link_scope { intra_node, inter_node };

std::string_view intra_link_name(intra_link k);  // "nvlink4"
std::string_view fabric_name(fabric f);          // "infiniband-ndr"
std::string_view nccl_algorithm_name(nccl_algorithm a);
// Each throws input_error naming `where` and the known names.
intra_link parse_intra_link(std::string_view text, std::string_view where);
fabric parse_fabric(std::string_view text, std::string_view where);
nccl_generation parse_nccl_generation(std::string_view text, std::string_view where);
nccl_algorithm parse_nccl_algorithm(std::string_view text, std::string_view where);
link_scope parse_link_scope(std::string_view text, std::string_view where);
std::string_view link_scope_name(link_scope s);  // "intra_node"

// What NCCL reaches on a kind of link inside a node ("link_kinds" in data/clusters.json).
struct link_kind_spec {
  intra_link kind = intra_link::nvlink4;
  double ring_efficiency = 0;              // ring busbw at large messages / one-way line rate, with peer-to-peer access
  double ring_efficiency_without_p2p = 0;  // the same where NCCL stages through host memory (PCIe without P2P)
  double nvls_efficiency = 0;              // NVLS all-reduce busbw on all the node's GPUs / line rate; 0: no NVLS
  nccl_generation generation = nccl_generation::hopper;
  std::uint32_t nccl_ring_channels = 0;           // NCCL's ring/tree channels in one node, one CTA each
  std::uint32_t nccl_nvls_channels = 0;           // NVLS CTAs in one node
  std::uint32_t nccl_nvls_channels_multi_node = 0;
  std::string source;
};

// The fraction of the NICs' line rate NCCL's ring reaches on a fabric ("fabrics" in data/clusters.json).
struct fabric_spec {
  fabric kind = fabric::none;
  double efficiency = 0;
  std::string source;
};

struct measured_point {
  double message_bytes = 0;     // nccl-tests' size column
  double bus_gbytes_per_s = 0;  // 1e9 B/s
  std::optional<double> time_us;
  std::string source;
};

// One measured run: a sweep over message sizes, or a single size.
struct measured_series {
  collective coll = collective::all_reduce;
  link_scope scope = link_scope::intra_node;
  std::uint64_t gpus = 0, nodes = 0;
  nccl_algorithm algorithm = nccl_algorithm::nccl_default;
  bool algorithm_forced = false;  // set through the environment (NCCL_ALGO, NCCL_NVLS_ENABLE), not NCCL's choice
  bool stock = true;              // false: a modified driver (the research's patched-P2P RTX 4090 run)
  std::string algorithm_note, placement, tool, nccl_version, date, hardware, kind;
  std::string source_of;  // the constant this run is a source of ("fabrics.efa-v1.efficiency"); "": none
  std::vector<measured_point> points;
};

// A figure from prose: a maintainer's expectation or a quoted peak, without a table row.
struct measured_statement {
  collective coll = collective::all_reduce;
  link_scope scope = link_scope::intra_node;
  std::uint64_t gpus = 0, nodes = 0;  // 0: not stated
  nccl_algorithm algorithm = nccl_algorithm::nccl_default;
  std::optional<double> bus_gbytes_per_s;
  std::optional<std::pair<double, double>> bus_gbytes_per_s_range, message_bytes_range;
  std::string algorithm_note, kind, nccl_version, hardware, source;
};

// A fitted scale of the model's effective bus bandwidth for one collective at one scope (clusters.json
// "fitted_efficiency", written by `plan calibrate --cluster-from`): the collective's time is the model's divided by
// `factor` (planner/time/collectives.cpp), so that 0.8 means the cluster reached 80% of what the model predicts.
struct fitted_efficiency {
  collective coll = collective::all_reduce;
  link_scope scope = link_scope::intra_node;
  double factor = 1;
  std::uint64_t samples = 0;  // the measured collectives (sizes and communicators) the median was taken over
  std::string source;
};

struct intra_node_link {
  intra_link kind = intra_link::nvlink4;
  double gbytes_per_s_per_gpu = 0;  // one way, line rate
  std::uint32_t links_per_gpu = 0;  // 0: not stated
  bool nvswitch = false;
  bool nvls = false;                // NVLink SHARP: the switch reduces (Hopper and later with NVSwitch)
  std::optional<bool> p2p;          // peer-to-peer access between the GPUs; nullopt: not verified
  std::string measured_in;          // the preset whose intra-node series stand for this baseboard ("" : its own)
  bool line_rate_only = false;
  std::string source;
  link_kind_spec spec;              // the link_kinds entry of `kind`
};

struct inter_node_link {
  fabric kind = fabric::none;
  std::uint32_t nics_per_node = 0;
  double gbits_per_s_per_nic = 0;  // line rate
  std::string nic;
  bool gpudirect_rdma = false;
  bool line_rate_only = false;
  std::string source;
  fabric_spec spec;                // the fabrics entry of `kind`

  double node_gbytes_per_s() const { return nics_per_node * gbits_per_s_per_nic / 8; }  // all NICs, one way
};

struct cluster_spec {
  std::string name;         // "dgx-h100"
  std::string description;
  std::string gpu;          // a name in data/gpus.json
  std::uint64_t gpus_per_node = 0;
  intra_node_link intra;
  inter_node_link inter;
  std::vector<measured_series> series;            // measured on this preset
  std::vector<measured_series> baseboard_series;  // intra-node series of intra.measured_in, copied by the loader
  std::vector<measured_statement> statements;
  std::vector<std::string> notes;
  std::vector<fitted_efficiency> fitted;  // measured on this cluster by plan calibrate --cluster-from; empty: none

  bool has_network() const { return inter.kind != fabric::none && inter.nics_per_node > 0 && inter.gbits_per_s_per_nic > 0; }
  // Ring busbw at large messages from the line rate (link_kinds): with P2P, or staged through host memory where
  // P2P is off or not verified (the slower figure stands until a measurement says otherwise).
  double ring_gbytes_per_s_from_line() const;
  // The all-reduce sweep on all the node's GPUs under NCCL's own algorithm choice with the most points, among
  // the preset's own intra-node series, else its baseboard's; nullptr when neither has one (4 points at least).
  const measured_series* intra_sweep() const;
  // The busbw measured at the largest message size among intra-node series of collective c run with algorithm a
  // (any GPU count; the mean where several runs share that size), own series first; nullopt when none.
  std::optional<double> intra_large_message_gbytes_per_s(collective c, nccl_algorithm a) const;
  // The fitted factor of collective c at `scope` (fitted_efficiency), 1 where none was fitted.
  double fitted_factor(collective c, link_scope scope) const;
};

}  // namespace trainplan
