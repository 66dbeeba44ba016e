#pragma once
// --cluster, --nodes and --gpus-per-node: the cluster preset a run is planned on and how its GPUs spread over
// nodes, as typed and resolved. Registered with the other run options (cli/model_run_options.cpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "planner/io/catalog.hpp"
#include "planner/run/run_config.hpp"
#include "planner/system/cluster.hpp"
#include "planner/time/collectives.hpp"

namespace trainplan::cli {

struct cluster_args {
  std::string cluster, nodes, gpus_per_node;  // as typed; empty: not given
};

void add_cluster_options(CLI::App& app, cluster_args& args, const std::string& group);

// The cluster a run is planned on and where its GPUs are.
struct cluster_choice {
  cluster_spec cluster;
  std::uint64_t nodes = 1;
  std::uint64_t gpus_per_node = 1;  // GPUs of each node the run uses: the preset's, or fewer with --gpus-per-node
  bool given = false;               // named with --cluster; false: the GPU's usual node (gpus.json "node")

  group_placement world() const { return {nodes * gpus_per_node, nodes}; }  // every GPU of the run
};

// The cluster for a run of `run.gpus` GPUs (--nodes without --gpus sets run.gpus = nodes x GPUs per node):
// --cluster NAME, else the usual node of the GPU named by `gpu`. --cluster names the GPU too; a --gpu (gpu_given)
// naming another is refused. Nodes: --nodes, else as few as hold run.gpus (ceil(gpus / GPUs per node), the
// GPUs spread evenly over them). Throws input_error for contradictions and for what an explicit --cluster cannot
// hold; where the cluster is only the GPU's usual node and cannot hold the run (GPUs that do not spread evenly,
// several nodes of a box without a network), or the GPU has none, returns nullopt: communication is then not
// modelled, as before clusters existed.
std::optional<cluster_choice> resolve_cluster(const cluster_args& args, const catalog& data, const std::string& gpu,
                                              bool gpu_given, bool gpus_given, run_config& run, std::vector<std::string>& notes);

}  // namespace trainplan::cli
