#include "cli/cluster_options.hpp"

#include <fmt/format.h>

#include "planner/util/input_error.hpp"
#include "planner/util/quantity_parse.hpp"

namespace trainplan::cli {

void add_cluster_options(CLI::App& app, cluster_args& a, const std::string& group) {
  app.add_option("--cluster", a.cluster,
                 "cluster preset (see `plan clusters`): its GPU, the links inside a node and between nodes (default: the "
                 "GPU's usual node, where it has one)")
      ->type_name("NAME")->group(group);
  app.add_option("--nodes", a.nodes, "nodes the GPUs spread over (default: as few as hold --gpus; with --gpus, "
                                     "--nodes x GPUs per node must equal it)")
      ->type_name("N")->group(group);
  app.add_option("--gpus-per-node", a.gpus_per_node, "GPUs of each node the run uses (default: all the preset's)")
      ->type_name("N")->group(group);
}

std::optional<cluster_choice> resolve_cluster(const cluster_args& a, const catalog& data, const std::string& gpu_name,
                                              bool gpu_given, bool gpus_given, run_config& run, std::vector<std::string>& notes) {
  const bool given = !a.cluster.empty();
  const bool layout_given = !a.nodes.empty() || !a.gpus_per_node.empty();
  cluster_choice choice;
  if (given) {
    choice.cluster = data.cluster(a.cluster);
    if (gpu_given) {
      const gpu_spec& asked = data.gpu(gpu_name);
      if (asked.name != data.gpu(choice.cluster.gpu).name)
        throw input_error(fmt::format("--gpu {} contradicts --cluster {}, whose GPU is {} (give one of them)", gpu_name,
                                      choice.cluster.name, choice.cluster.gpu));
    }
  } else {
    const gpu_spec& gpu = data.gpu(gpu_name);
    const cluster_spec* usual = data.usual_cluster(gpu);
    if (!usual) {
      if (layout_given)
        throw input_error(fmt::format("{} needs a cluster: GPU {} has no usual node; give --cluster NAME (see `plan clusters`)",
                                      !a.nodes.empty() ? "--nodes" : "--gpus-per-node", gpu.name));
      return std::nullopt;
    }
    choice.cluster = *usual;
  }
  const cluster_spec& c = choice.cluster;
  choice.given = given;
  // Refused outright when the user chose the layout; otherwise the run plans as it did before clusters existed.
  const bool strict = given || layout_given;
  auto refuse = [&](const std::string& why) -> std::optional<cluster_choice> {
    if (strict) throw input_error(why);
    return std::nullopt;
  };

  choice.gpus_per_node = c.gpus_per_node;
  if (!a.gpus_per_node.empty()) {
    choice.gpus_per_node = parse_integer(a.gpus_per_node, "--gpus-per-node");
    if (choice.gpus_per_node == 0 || choice.gpus_per_node > c.gpus_per_node)
      throw input_error(fmt::format("--gpus-per-node {}: a {} node holds 1 to {} GPUs", a.gpus_per_node, c.name, c.gpus_per_node));
  }
  if (!a.nodes.empty()) {
    choice.nodes = parse_integer(a.nodes, "--nodes");
    if (choice.nodes == 0 || choice.nodes > (1u << 20)) throw input_error("--nodes must be between 1 and 1048576");
    const std::uint64_t total = choice.nodes * choice.gpus_per_node;
    if (gpus_given && run.gpus != total)
      throw input_error(fmt::format("--nodes {} x {} GPUs per node = {} GPUs, but --gpus {}", choice.nodes, choice.gpus_per_node,
                                    total, run.gpus));
    run.gpus = total;
  } else {
    choice.nodes = (run.gpus + choice.gpus_per_node - 1) / choice.gpus_per_node;
    if (run.gpus % choice.nodes != 0)
      return refuse(fmt::format("--gpus {} does not spread evenly over {} nodes of {} GPUs: give --nodes and --gpus-per-node",
                                run.gpus, choice.nodes, choice.gpus_per_node));
    // Fewer GPUs than a node holds use part of one node; more use the same number on each node.
    choice.gpus_per_node = run.gpus / choice.nodes;
  }
  if (choice.nodes > 1 && !c.has_network())
    return refuse(fmt::format("cluster {} has no network between nodes: at most {} GPUs", c.name, c.gpus_per_node));
  if (strict)
    notes.push_back(fmt::format("cluster {}: {} node{} x {} {} GPUs ({}{})",
                                c.name, choice.nodes, choice.nodes == 1 ? "" : "s", choice.gpus_per_node, c.gpu,
                                intra_link_name(c.intra.kind),
                                c.has_network() ? fmt::format(", {} x {} Gb/s {} a node", c.inter.nics_per_node,
                                                              c.inter.gbits_per_s_per_nic, fabric_name(c.inter.kind))
                                                : std::string()));
  return choice;
}

}  // namespace trainplan::cli
