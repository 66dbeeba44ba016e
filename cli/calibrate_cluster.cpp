// `plan calibrate --cluster-from REPORT...` (calibrate_shared.hpp): a cluster's effective bus bandwidths fitted
// to the collectives that collector reports timed (planner/measure/cluster_fit.hpp).
#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <fstream>
#include <sstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <type_traits>

#include "planner/profiles/registry.hpp"
#include "cli/bench_run.hpp"
#include "cli/output_file.hpp"
#include "cli/calibrate_shared.hpp"
#include "cli/commands.hpp"
#include "cli/format.hpp"
#include "cli/measurement_check.hpp"
#include "planner/measure/calibration_fit.hpp"
#include "planner/measure/cluster_fit.hpp"
#include "planner/measure/collector_fit.hpp"
#include "planner/measure/measured_runs.hpp"
#include "planner/io/catalog.hpp"
#include "planner/io/embedded_data.hpp"
#include "planner/util/input_error.hpp"
#include "planner/util/names.hpp"
#include "planner/util/text_file.hpp"
#include "planner/evaluate/plan.hpp"
#include "planner/measure/timing_fit.hpp"

namespace trainplan::cli {

using json = nlohmann::json;

// The clusters.json entry of `name` as written: the --data-dir's clusters.json where it holds one, else the built-in
// file's. (The entry is copied whole: a user's clusters.json replaces a preset by name, entry for entry.)
json raw_cluster_entry(const std::string& data_dir, const std::string& name) {
  auto find_in = [&](const std::string& text, const std::string& file) -> std::optional<json> {
    json doc;
    try {
      doc = json::parse(text);
    } catch (const json::exception& e) {
      throw input_error(fmt::format("{}: not valid JSON ({})", file, e.what()));
    }
    if (doc.is_object() && doc.contains("clusters") && doc["clusters"].is_array())
      for (const json& c : doc["clusters"])
        if (c.is_object() && c.contains("name") && c["name"].is_string() && same_name(c["name"].get<std::string>(), name))
          return c;
    return std::nullopt;
  };
  if (!data_dir.empty()) {
    const std::filesystem::path user = std::filesystem::path(data_dir) / "clusters.json";
    std::error_code ec;
    if (std::filesystem::is_regular_file(user, ec))
      if (std::optional<json> c = find_in(read_text_file(user), user.string())) return *c;
  }
  for (const embedded_file& f : embedded_data_files())
    if (f.name == "clusters.json")
      if (std::optional<json> c = find_in(std::string(f.bytes), "clusters.json")) return *c;
  throw input_error(fmt::format("calibrate --cluster-from: cluster '{}' has no entry in clusters.json", name));
}

// `plan calibrate --cluster-from REPORT...`: the cluster's effective bus bandwidths fitted to the collectives the
// reports timed (planner/measure/cluster_fit.hpp), printed, and with -o written as a clusters.json for --data-dir:
// the preset's entry with its "fitted_efficiency".
int calibrate_cluster(const calibrate_args& args, const catalog& data) {
  const cluster_spec* preset = nullptr;
  if (!args.cluster.empty()) {
    preset = &data.cluster(args.cluster);
  } else {
    const gpu_spec& g = data.gpu(args.gpu);
    preset = data.usual_cluster(g);
    if (!preset)
      throw input_error(fmt::format("calibrate --cluster-from: {} has no usual cluster preset: name one with --cluster", g.name));
  }
  std::vector<measured_file> files;
  for (const std::string& path : args.cluster_from) files.push_back(parse_measurements(read_text_file(path), path));
  const cluster_fit fit = fit_cluster(*preset, files);
  fmt::print("plan calibrate --cluster-from: {} ({}), {} measured collective{} of {} report{}{}\n\n", preset->name,
             preset->description, fit.samples.size(), fit.samples.size() == 1 ? "" : "s", files.size(),
             files.size() == 1 ? "" : "s",
             fit.left_out ? fmt::format(" ({} left out: kinds the planner does not time, or without sizes)", fit.left_out) : "");
  fmt::print("  {:<10} {:<14} {:<15} {:>12} {:>6} {:>5} {:>10} {:>10} {:>8}\n", "run", "collective", "scope", "bytes", "ranks",
             "nodes", "measured", "model", "ratio");
  for (const cluster_fit_sample& s : fit.samples)
    fmt::print("  {:<10} {:<14} {:<15} {:>12.0f} {:>6} {:>5} {:>8.3f}ms {:>8.3f}ms {:>8.3f}\n", s.run_id, collective_name(s.coll),
               link_scope_name(s.scope), s.message_bytes, s.ranks, s.nodes, s.measured_seconds * 1e3,
               s.predicted_seconds * 1e3, s.ratio());
  fmt::print("\n  fitted: the model's effective bus bandwidth x factor (= 1 / the median measured/model ratio)\n");
  for (const cluster_fit_row& r : fit.rows)
    fmt::print("  {:<14} {:<11} {:>3} sample{} factor {:.3f}; error median {:.1f}% largest {:.1f}% before, median {:.1f}% "
               "largest {:.1f}% after\n",
               collective_name(r.coll), link_scope_name(r.scope), r.samples, r.samples == 1 ? ": " : "s:", r.factor,
               r.median_error_before_pct, r.max_error_before_pct, r.median_error_after_pct, r.max_error_after_pct);

  json entry = raw_cluster_entry(args.data_dir, preset->name);
  json fitted = json::array();
  std::string names;
  for (const std::string& path : args.cluster_from)
    names += (names.empty() ? "" : ", ") + std::filesystem::path(path).filename().string();
  for (const cluster_fit_row& r : fit.rows)
    fitted.push_back({{"collective", std::string(collective_name(r.coll))},
                      {"scope", std::string(link_scope_name(r.scope))},
                      {"factor", r.factor},
                      {"samples", r.samples},
                      {"source", fmt::format("plan calibrate --cluster-from {}: 1 / the median of measured / model time over {} "
                                             "collective{} (collect_hf.py --parallel under torchrun --profile)",
                                             names, r.samples, r.samples == 1 ? "" : "s")}});
  // What an earlier fit set for kinds and scopes these reports did not measure stays.
  if (entry.contains("fitted_efficiency") && entry["fitted_efficiency"].is_array())
    for (const json& old : entry["fitted_efficiency"]) {
      const bool refit = std::any_of(fitted.begin(), fitted.end(), [&](const json& f) {
        return old.is_object() && json(old.value("collective", "")) == f["collective"] && json(old.value("scope", "")) == f["scope"];
      });
      if (!refit) fitted.push_back(old);
    }
  entry["fitted_efficiency"] = fitted;

  json doc = {{"clusters", json::array()}};
  std::error_code ec;
  if (!args.output.empty() && std::filesystem::is_regular_file(args.output, ec) && std::filesystem::file_size(args.output, ec) > 0) {
    try {
      doc = json::parse(read_text_file(args.output, file_use::updated));
    } catch (const json::exception& e) {
      throw input_error(fmt::format("{}: not valid JSON ({})", args.output, e.what()));
    }
    if (!doc.is_object() || !doc.contains("clusters") || !doc["clusters"].is_array())
      throw input_error(fmt::format("{}: not a clusters.json (an object with a \"clusters\" list)", args.output));
  }
  json& list = doc["clusters"];
  auto same = std::find_if(list.begin(), list.end(), [&](const json& c) {
    return c.is_object() && c.contains("name") && c["name"].is_string() && same_name(c["name"].get<std::string>(), preset->name);
  });
  if (same != list.end()) *same = entry;
  else list.push_back(entry);
  const std::string text = doc.dump(2) + "\n";
  catalog check = data;
  check.apply_clusters(text);  // never write what the loader would reject
  if (args.output.empty()) {
    fmt::print("\nclusters.json for --data-dir (-o FILE writes it):\n{}", text);
  } else {
    write_output(args.output, text);
    fmt::print("\nWrote cluster {} with its fitted efficiencies to {} (plan --data-dir {} reads it)\n", preset->name,
               args.output, std::filesystem::path(args.output).parent_path().string());
  }
  return 0;
}

}  // namespace trainplan::cli
