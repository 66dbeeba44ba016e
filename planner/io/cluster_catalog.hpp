#pragma once
// data/clusters.json read strictly: the cluster presets, and the link kinds and fabrics they name. An unknown or
// missing key, a value out of range or a name that resolves to nothing is an input_error naming the file, the
// entry and the key.
#include <string_view>
#include <vector>

#include "planner/system/cluster.hpp"
#include "planner/system/gpu_spec.hpp"

namespace trainplan {

struct cluster_tables {
  std::vector<link_kind_spec> link_kinds;
  std::vector<fabric_spec> fabrics;
  std::vector<cluster_spec> clusters;  // as written; resolve_cluster_tables fills their specs and baseboard series
};

cluster_tables parse_cluster_tables(std::string_view text);
// A user's file over another: entries of the same name are replaced, others added.
void merge_cluster_tables(cluster_tables& into, cluster_tables from);
// Gives each cluster its link kind's and fabric's entries and its baseboard's intra-node series, and checks that
// every name resolves: a cluster's link kind, fabric, GPU (in `gpus`) and measured_in, and each GPU's node.
void resolve_cluster_tables(cluster_tables& tables, const std::vector<gpu_spec>& gpus);

}  // namespace trainplan
