#include "planner/system/cluster.hpp"

#include "planner/util/names.hpp"

namespace trainplan {
namespace {

constexpr named<intra_link> intra_link_names[] = {
    {intra_link::nvlink3, "nvlink3"}, {intra_link::nvlink4, "nvlink4"}, {intra_link::nvlink5, "nvlink5"},
    {intra_link::pcie4, "pcie4"},     {intra_link::pcie5, "pcie5"},
};
constexpr named<fabric> fabric_names[] = {
    {fabric::none, "none"},     {fabric::infiniband_hdr, "infiniband-hdr"}, {fabric::infiniband_ndr, "infiniband-ndr"},
    {fabric::efa_v1, "efa-v1"}, {fabric::efa_v2, "efa-v2"},                 {fabric::efa_v4, "efa-v4"},
    {fabric::tcpx, "tcpx"},     {fabric::tcpxo, "tcpxo"},                   {fabric::roce, "roce"},
    {fabric::ethernet, "ethernet"},
};
constexpr named<nccl_generation> generation_names[] = {
    {nccl_generation::ampere, "ampere"}, {nccl_generation::hopper, "hopper"}, {nccl_generation::blackwell, "blackwell"},
};
constexpr named<nccl_algorithm> algorithm_names[] = {
    {nccl_algorithm::nccl_default, "default"}, {nccl_algorithm::ring, "ring"}, {nccl_algorithm::tree, "tree"},
    {nccl_algorithm::nvls, "nvls"},            {nccl_algorithm::collnet_chain, "collnet-chain"},
};
constexpr named<link_scope> scope_names[] = {{link_scope::intra_node, "intra_node"}, {link_scope::inter_node, "inter_node"}};

// A sweep needs enough sizes to interpolate between; fewer points are single-size runs (plateau figures).
constexpr std::size_t min_sweep_points = 4;

}  // namespace

std::string_view intra_link_name(intra_link k) { return name_of(intra_link_names, k); }
std::string_view fabric_name(fabric f) { return name_of(fabric_names, f); }
std::string_view nccl_algorithm_name(nccl_algorithm a) { return name_of(algorithm_names, a); }
intra_link parse_intra_link(std::string_view text, std::string_view where) {
  return parse_named(intra_link_names, text, where, "link kind");
}
fabric parse_fabric(std::string_view text, std::string_view where) { return parse_named(fabric_names, text, where, "fabric"); }
nccl_generation parse_nccl_generation(std::string_view text, std::string_view where) {
  return parse_named(generation_names, text, where, "NCCL generation");
}
nccl_algorithm parse_nccl_algorithm(std::string_view text, std::string_view where) {
  return parse_named(algorithm_names, text, where, "algorithm");
}
link_scope parse_link_scope(std::string_view text, std::string_view where) {
  return parse_named(scope_names, text, where, "scope");
}

std::string_view link_scope_name(link_scope s) { return name_of(scope_names, s); }

double cluster_spec::fitted_factor(collective c, link_scope scope) const {
  for (const fitted_efficiency& f : fitted)
    if (f.coll == c && f.scope == scope) return f.factor;
  return 1;
}

double cluster_spec::ring_gbytes_per_s_from_line() const {
  const bool p2p = intra.p2p.value_or(false);
  return intra.gbytes_per_s_per_gpu * (p2p ? intra.spec.ring_efficiency : intra.spec.ring_efficiency_without_p2p);
}

const measured_series* cluster_spec::intra_sweep() const {
  for (const std::vector<measured_series>* list : {&series, &baseboard_series}) {
    const measured_series* best = nullptr;
    for (const measured_series& s : *list)
      if (s.stock && s.scope == link_scope::intra_node && s.coll == collective::all_reduce && s.gpus == gpus_per_node &&
          s.algorithm == nccl_algorithm::nccl_default && s.points.size() >= min_sweep_points &&
          (!best || s.points.size() > best->points.size()))
        best = &s;
    if (best) return best;
  }
  return nullptr;
}

std::optional<double> cluster_spec::intra_large_message_gbytes_per_s(collective c, nccl_algorithm a) const {
  for (const std::vector<measured_series>* list : {&series, &baseboard_series}) {
    double largest_bytes = 0, sum = 0;
    int count = 0;
    for (const measured_series& s : *list) {
      if (!s.stock || s.scope != link_scope::intra_node || s.coll != c || s.algorithm != a) continue;
      for (const measured_point& p : s.points) {
        if (p.message_bytes > largest_bytes) largest_bytes = p.message_bytes, sum = 0, count = 0;
        if (p.message_bytes == largest_bytes) sum += p.bus_gbytes_per_s, ++count;
      }
    }
    if (count > 0) return sum / count;
  }
  return std::nullopt;
}

}  // namespace trainplan
