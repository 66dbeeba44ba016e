// `plan clusters`: the cluster presets of data/clusters.json, as a table or JSON.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "planner/io/catalog.hpp"
#include "planner/measure/collective_check.hpp"

namespace trainplan::cli {

namespace {

std::string intra_text(const cluster_spec& c) {
  return fmt::format("{} {:g} GB/s{}{}", intra_link_name(c.intra.kind), c.intra.gbytes_per_s_per_gpu,
                     c.intra.nvls ? " NVLS" : c.intra.nvswitch ? " NVSwitch" : "",
                     c.intra.p2p == false ? " no-P2P" : !c.intra.p2p ? " P2P?" : "");
}

std::string inter_text(const cluster_spec& c) {
  if (!c.has_network()) return "none (one box)";
  return fmt::format("{} x {:g} Gb/s {}", c.inter.nics_per_node, c.inter.gbits_per_s_per_nic, fabric_name(c.inter.kind));
}

// Measured points that bear on the preset: its own, and its baseboard's intra-node ones (measured_in).
std::size_t measured_points(const cluster_spec& c) {
  std::size_t n = 0;
  for (const auto* list : {&c.series, &c.baseboard_series})
    for (const measured_series& s : *list) n += s.points.size();
  return n;
}

nlohmann::json cluster_json(const cluster_spec& c) {
  nlohmann::json j;
  j["name"] = c.name;
  j["description"] = c.description;
  j["gpu"] = c.gpu;
  j["gpus_per_node"] = c.gpus_per_node;
  j["intra_node"] = {{"kind", intra_link_name(c.intra.kind)},
                     {"gbytes_per_s_per_gpu", c.intra.gbytes_per_s_per_gpu},
                     {"nvswitch", c.intra.nvswitch},
                     {"nvls", c.intra.nvls},
                     {"p2p", c.intra.p2p ? nlohmann::json(*c.intra.p2p) : nlohmann::json()},
                     {"measured_in", c.intra.measured_in.empty() ? nlohmann::json() : nlohmann::json(c.intra.measured_in)}};
  j["inter_node"] = {{"kind", fabric_name(c.inter.kind)},
                     {"nics_per_node", c.inter.nics_per_node},
                     {"gbits_per_s_per_nic", c.inter.gbits_per_s_per_nic},
                     {"gpudirect_rdma", c.inter.gpudirect_rdma},
                     {"efficiency", c.inter.spec.efficiency}};
  j["measured_points"] = measured_points(c);
  return j;
}

std::string size_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  return fmt::format("{:g} {}", bytes, units[u]);
}

std::string time_text(double seconds) {
  return seconds < 1e-3 ? fmt::format("{:.1f} us", seconds * 1e6) : fmt::format("{:.3f} ms", seconds * 1e3);
}

// A size band for the summary: latency-bound, the ramp, the plateau.
std::string band(double bytes) {
  return bytes < (1 << 20) ? "< 1 MiB" : bytes < (256 << 20) ? "1-256 MiB" : ">= 256 MiB";
}

// `plan clusters --check`: every measured point against the model, and the spread of the errors by role, scope and
// size (Calculon's validation command prints the same kind of table).
int print_check(const catalog& c, bool json) {
  const std::vector<collective_check_row> rows = check_collectives(c.clusters());
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const collective_check_row& r : rows)
      out.push_back({{"cluster", r.cluster}, {"collective", collective_name(r.coll)}, {"gpus", r.gpus}, {"nodes", r.nodes},
                     {"algorithm", r.algorithm}, {"message_bytes", r.message_bytes}, {"measured_seconds", r.measured_seconds},
                     {"predicted_seconds", r.predicted_seconds}, {"error", r.error}, {"role", check_role_name(r.role)},
                     {"source", r.source}});
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print("{:<22} {:<14} {:>7} {:<13} {:>9} {:>12} {:>12} {:>8}  {}\n", "cluster", "collective", "ranks", "algorithm", "size",
             "measured", "predicted", "error", "role");
  for (const collective_check_row& r : rows)
    fmt::print("{:<22} {:<14} {:>7} {:<13} {:>9} {:>12} {:>12} {:>+7.1f}%  {}\n", r.cluster, collective_name(r.coll),
               fmt::format("{}x{}", r.gpus / r.nodes, r.nodes), r.algorithm, size_text(r.message_bytes),
               time_text(r.measured_seconds), time_text(r.predicted_seconds), 100 * r.error, check_role_name(r.role));
  std::map<std::string, std::vector<double>> groups;  // "role, scope, band" -> |errors|
  for (const collective_check_row& r : rows)
    groups[fmt::format("{:<13} {:<11} {:<10}", check_role_name(r.role), r.nodes > 1 ? "inter-node" : "intra-node",
                       band(r.message_bytes))]
        .push_back(std::fabs(r.error));
  fmt::print("\n{:<36} {:>5} {:>14} {:>11}\n", "role, scope, size", "rows", "median |error|", "max |error|");
  for (auto& [key, errors] : groups) {
    std::sort(errors.begin(), errors.end());
    const double median = errors.size() % 2 ? errors[errors.size() / 2]
                                            : (errors[errors.size() / 2 - 1] + errors[errors.size() / 2]) / 2;
    fmt::print("{:<36} {:>5} {:>13.1f}% {:>10.1f}%\n", key, errors.size(), 100 * median, 100 * errors.back());
  }
  fmt::print("error: predicted / measured time - 1. held out: no part of the run went into the model; leave-one-out: a "
             "sweep point predicted from the rest of its sweep; source: the run sets a link or fabric efficiency; forced: "
             "an algorithm set through the environment, against the model's NCCL default; modified: not a stock driver\n");
  return 0;
}

}  // namespace

void register_clusters_command(CLI::App& app, command_action& chosen) {
  auto data_dir = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto check = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("clusters", "list the cluster presets in data/clusters.json");
  cmd->add_option("--data-dir", *data_dir, "folder whose clusters.json adds to or replaces the built-in presets");
  cmd->add_flag("--json", *json, "print a JSON array instead of the table");
  cmd->add_flag("--check", *check, "every measured NCCL run against the collective model: predicted and measured time, the error");
  cmd->callback([&chosen, data_dir, json, check]() {
    chosen = [data_dir, json, check]() {
      const catalog c = catalog::load(data_dir->empty() ? std::nullopt : std::optional<std::filesystem::path>(*data_dir));
      if (*check) return print_check(c, *json);
      if (*json) {
        nlohmann::json out = nlohmann::json::array();
        for (const cluster_spec& k : c.clusters()) out.push_back(cluster_json(k));
        fmt::print("{}\n", out.dump(2));
        return 0;
      }
      fmt::print("{:<22} {:<10} {:>9}  {:<30} {:<28} {:>8}\n", "name", "gpu", "gpus/node", "inside a node (per GPU)",
                 "between nodes (per node)", "measured");
      for (const cluster_spec& k : c.clusters())
        fmt::print("{:<22} {:<10} {:>9}  {:<30} {:<28} {:>8}\n", k.name, k.gpu, k.gpus_per_node, intra_text(k), inter_text(k),
                   measured_points(k) > 0 ? fmt::format("{}", measured_points(k)) : "-");
      fmt::print("link rates are one way; measured: NCCL bus-bandwidth points that bear on the preset (its own and its "
                 "baseboard's; -: line rate only); sources are in data/clusters.json\n");
      return 0;
    };
  });
}

}  // namespace trainplan::cli
