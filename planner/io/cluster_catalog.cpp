#include "planner/io/cluster_catalog.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "planner/io/strict_json.hpp"
#include "planner/util/input_error.hpp"
#include "planner/util/names.hpp"

namespace trainplan {
namespace {

using json = nlohmann::json;
const std::string file = "clusters.json";

// Ranges that keep every derived time finite and catch a unit slip (Gb/s for GB/s, bits for bytes): no link,
// NIC or node of today comes near these bounds.
constexpr double max_gbytes_per_s = 1e5;       // 100 TB/s one way
constexpr std::uint64_t max_gpus_per_node = 4096;
constexpr std::uint64_t max_nics_per_node = 1024;
constexpr double max_message_bytes = 0x1p50;   // 1 PiB
constexpr std::uint64_t max_channels = 64;     // NCCL's MAXCHANNELS (src/include/device.h)

double number_in(strict_object& o, const char* key, double lo, double hi) {
  const double v = o.number(key);
  if (!(v >= lo && v <= hi)) throw input_error(fmt::format("{}: {} must be within [{}, {}]", o.where(), key, lo, hi));
  return v;
}

std::uint64_t uint_in(strict_object& o, const char* key, std::uint64_t lo, std::uint64_t hi) {
  const std::uint64_t v = o.uint(key);
  if (v < lo || v > hi) throw input_error(fmt::format("{}: {} must be between {} and {}", o.where(), key, lo, hi));
  return v;
}

std::string optional_string(strict_object& o, const char* key) { return o.has(key) ? o.string(key) : std::string(); }

std::pair<double, double> range_of(strict_object& o, const char* key) {
  const json& v = o.at(key);
  if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_number() || !(v[0].get<double>() <= v[1].get<double>()))
    throw input_error(fmt::format("{}: key '{}' must be [low, high]", o.where(), key));
  return {v[0].get<double>(), v[1].get<double>()};
}

const json& array_at(strict_object& o, const char* key) {
  const json& v = o.at(key);
  if (!v.is_array()) throw input_error(fmt::format("{}: key '{}' must be an array", o.where(), key));
  return v;
}

link_kind_spec parse_link_kind(const json& j, const std::string& where) {
  strict_object o(j, where);
  link_kind_spec k;
  k.kind = parse_intra_link(o.string("name"), where + ": name");
  k.ring_efficiency = number_in(o, "ring_efficiency", 0.01, 1);
  k.ring_efficiency_without_p2p = number_in(o, "ring_efficiency_without_p2p", 0.01, 1);
  k.nvls_efficiency = number_in(o, "nvls_efficiency", 0, 2);  // NVLS busbw exceeds the line rate (480 over 450)
  k.generation = parse_nccl_generation(o.string("nccl_generation"), where + ": nccl_generation");
  k.nccl_ring_channels = static_cast<std::uint32_t>(uint_in(o, "nccl_ring_channels", 1, max_channels));
  k.nccl_nvls_channels = static_cast<std::uint32_t>(uint_in(o, "nccl_nvls_channels", 0, max_channels));
  k.nccl_nvls_channels_multi_node = static_cast<std::uint32_t>(uint_in(o, "nccl_nvls_channels_multi_node", 0, max_channels));
  k.source = o.string("source");
  o.finish();
  if ((k.nvls_efficiency > 0) != (k.nccl_nvls_channels > 0))
    throw input_error(where + ": nvls_efficiency and nccl_nvls_channels must both be 0 (no NVLS) or both above 0");
  return k;
}

fabric_spec parse_fabric_entry(const json& j, const std::string& where) {
  strict_object o(j, where);
  fabric_spec f;
  f.kind = parse_fabric(o.string("name"), where + ": name");
  f.efficiency = number_in(o, "efficiency", 0, 1);
  f.source = o.string("source");
  o.finish();
  if ((f.kind == fabric::none) != (f.efficiency == 0))
    throw input_error(where + ": efficiency is 0 for fabric none and above 0 for any other");
  return f;
}

measured_series parse_series(const json& j, const std::string& where) {
  strict_object o(j, where);
  measured_series s;
  s.coll = parse_collective(o.string("collective"), where + ": collective");
  s.scope = parse_link_scope(o.string("scope"), where + ": scope");
  s.gpus = uint_in(o, "gpus", 1, 1u << 20);
  s.nodes = uint_in(o, "nodes", 1, 1u << 20);
  if (s.gpus < s.nodes || s.gpus % s.nodes != 0) throw input_error(where + ": gpus must be a multiple of nodes");
  if ((s.scope == link_scope::intra_node) != (s.nodes == 1))
    throw input_error(where + ": scope intra_node goes with nodes 1, inter_node with more");
  s.algorithm = parse_nccl_algorithm(o.string("algorithm"), where + ": algorithm");
  s.algorithm_forced = o.boolean("algorithm_forced");
  s.algorithm_note = optional_string(o, "algorithm_note");
  s.stock = o.boolean("stock");
  s.placement = optional_string(o, "placement");
  s.tool = optional_string(o, "tool");
  s.nccl_version = optional_string(o, "nccl_version");
  s.date = optional_string(o, "date");
  s.hardware = optional_string(o, "hardware");
  s.kind = optional_string(o, "kind");
  s.source_of = optional_string(o, "source_of");
  const json& points = array_at(o, "points");
  o.finish();
  if (points.empty()) throw input_error(where + ": points is empty");
  for (std::size_t i = 0; i < points.size(); ++i) {
    strict_object p(points[i], fmt::format("{}.points[{}]", where, i));
    measured_point m;
    m.message_bytes = number_in(p, "message_bytes", 1, max_message_bytes);
    m.bus_gbytes_per_s = number_in(p, "bus_gbytes_per_s", 0, max_gbytes_per_s);
    if (p.has("alg_gbytes_per_s")) number_in(p, "alg_gbytes_per_s", 0, max_gbytes_per_s);  // kept in the file, derivable
    if (p.has("time_us")) m.time_us = number_in(p, "time_us", 0, 1e12);
    m.source = p.string("source");
    p.finish();
    s.points.push_back(std::move(m));
  }
  return s;
}

measured_statement parse_statement(const json& j, const std::string& where) {
  strict_object o(j, where);
  measured_statement s;
  s.coll = parse_collective(o.string("collective"), where + ": collective");
  s.scope = parse_link_scope(o.string("scope"), where + ": scope");
  if (o.has("gpus")) s.gpus = uint_in(o, "gpus", 1, 1u << 20);
  if (o.has("nodes")) s.nodes = uint_in(o, "nodes", 1, 1u << 20);
  s.algorithm = parse_nccl_algorithm(o.string("algorithm"), where + ": algorithm");
  s.algorithm_note = optional_string(o, "algorithm_note");
  if (o.has("bus_gbytes_per_s")) s.bus_gbytes_per_s = number_in(o, "bus_gbytes_per_s", 0, max_gbytes_per_s);
  if (o.has("bus_gbytes_per_s_range")) s.bus_gbytes_per_s_range = range_of(o, "bus_gbytes_per_s_range");
  if (o.has("message_bytes_range")) s.message_bytes_range = range_of(o, "message_bytes_range");
  s.kind = optional_string(o, "kind");
  s.nccl_version = optional_string(o, "nccl_version");
  s.hardware = optional_string(o, "hardware");
  s.source = o.string("source");
  o.finish();
  if (!s.bus_gbytes_per_s && !s.bus_gbytes_per_s_range)
    throw input_error(where + ": a statement needs bus_gbytes_per_s or bus_gbytes_per_s_range");
  return s;
}

// "fitted_efficiency": [{"collective", "scope", "factor", "samples", "source"}] (plan calibrate --cluster-from): at
// most one entry per collective and scope. The factor's range keeps a fitted time within 100x of the model's both
// ways: a wider one is a unit slip or a broken measurement, not a cluster.
fitted_efficiency parse_fitted(const json& j, const std::string& where) {
  strict_object o(j, where);
  fitted_efficiency f;
  f.coll = parse_collective(o.string("collective"), where + ": collective");
  f.scope = parse_link_scope(o.string("scope"), where + ": scope");
  f.factor = number_in(o, "factor", 0.01, 100);
  f.samples = uint_in(o, "samples", 1, 1u << 30);
  f.source = o.string("source");
  o.finish();
  return f;
}

cluster_spec parse_cluster(const json& j, const std::string& where) {
  strict_object o(j, where);
  cluster_spec c;
  c.name = o.string("name");
  if (c.name.empty() || c.name.find_first_of(" \t\n,") != std::string::npos)
    throw input_error(fmt::format("{}: name '{}' must be one word", where, c.name));
  const std::string at = fmt::format("{}: cluster '{}'", file, c.name);  // later errors name the cluster
  c.description = o.string("description");
  c.gpu = o.string("gpu");
  c.gpus_per_node = uint_in(o, "gpus_per_node", 1, max_gpus_per_node);

  strict_object intra(o.at("intra_node"), at + ": intra_node");
  c.intra.kind = parse_intra_link(intra.string("kind"), intra.where() + ": kind");
  c.intra.gbytes_per_s_per_gpu = number_in(intra, "gbytes_per_s_per_gpu", 0.1, max_gbytes_per_s);
  if (intra.has("links_per_gpu")) c.intra.links_per_gpu = static_cast<std::uint32_t>(uint_in(intra, "links_per_gpu", 1, 1024));
  c.intra.nvswitch = intra.boolean("nvswitch");
  c.intra.nvls = intra.boolean("nvls");
  if (!intra.at("p2p").is_null()) c.intra.p2p = intra.boolean("p2p");  // null: not verified
  c.intra.measured_in = optional_string(intra, "measured_in");
  if (intra.has("line_rate_only")) c.intra.line_rate_only = intra.boolean("line_rate_only");
  c.intra.source = intra.string("source");
  intra.finish();
  if (c.intra.nvls && !c.intra.nvswitch) throw input_error(intra.where() + ": nvls needs nvswitch (the switch does the reduction)");

  strict_object inter(o.at("inter_node"), at + ": inter_node");
  c.inter.kind = parse_fabric(inter.string("kind"), inter.where() + ": kind");
  c.inter.nics_per_node = static_cast<std::uint32_t>(uint_in(inter, "nics_per_node", 0, max_nics_per_node));
  c.inter.gbits_per_s_per_nic = number_in(inter, "gbits_per_s_per_nic", 0, 8 * max_gbytes_per_s);
  c.inter.nic = optional_string(inter, "nic");
  c.inter.gpudirect_rdma = inter.boolean("gpudirect_rdma");
  if (inter.has("line_rate_only")) c.inter.line_rate_only = inter.boolean("line_rate_only");
  c.inter.source = inter.string("source");
  inter.finish();
  if ((c.inter.kind == fabric::none) != (c.inter.nics_per_node == 0 || c.inter.gbits_per_s_per_nic == 0))
    throw input_error(inter.where() + ": kind none goes with no NICs, any other kind with NICs of a rate above 0");

  const json& series = array_at(o, "series");
  for (std::size_t i = 0; i < series.size(); ++i) {
    measured_series s = parse_series(series[i], fmt::format("{}: series[{}]", at, i));
    if (s.gpus > s.nodes * c.gpus_per_node)
      throw input_error(fmt::format("{}: series[{}]: {} GPUs on {} nodes of {} GPUs", at, i, s.gpus, s.nodes, c.gpus_per_node));
    c.series.push_back(std::move(s));
  }
  const json& statements = array_at(o, "statements");
  for (std::size_t i = 0; i < statements.size(); ++i)
    c.statements.push_back(parse_statement(statements[i], fmt::format("{}: statements[{}]", at, i)));
  const json& notes = array_at(o, "notes");
  for (const json& n : notes) {
    if (!n.is_string()) throw input_error(at + ": notes must be strings");
    c.notes.push_back(n.get<std::string>());
  }
  if (o.has("fitted_efficiency")) {
    const json& fitted = array_at(o, "fitted_efficiency");
    for (std::size_t i = 0; i < fitted.size(); ++i) {
      fitted_efficiency f = parse_fitted(fitted[i], fmt::format("{}: fitted_efficiency[{}]", at, i));
      if (std::any_of(c.fitted.begin(), c.fitted.end(), [&](const fitted_efficiency& x) { return x.coll == f.coll && x.scope == f.scope; }))
        throw input_error(fmt::format("{}: fitted_efficiency lists {} {} twice", at, collective_name(f.coll), link_scope_name(f.scope)));
      c.fitted.push_back(std::move(f));
    }
  }
  o.finish();
  return c;
}

// Names match as everywhere else, whatever their case (same_name): a user's "DGX-H100" replaces the built-in
// dgx-h100. (It was compared exactly and added as a second preset that --cluster never reached, while one file
// listing both is refused as a duplicate.)
bool same_key(intra_link a, intra_link b) { return a == b; }
bool same_key(fabric a, fabric b) { return a == b; }
bool same_key(const std::string& a, const std::string& b) { return same_name(a, b); }

template <typename T, typename Name>
void merge_by(std::vector<T>& into, std::vector<T> from, Name name_of_entry) {
  for (T& item : from) {
    auto it = std::find_if(into.begin(), into.end(), [&](const T& x) { return same_key(name_of_entry(x), name_of_entry(item)); });
    if (it != into.end()) *it = std::move(item);
    else into.push_back(std::move(item));
  }
}

}  // namespace

cluster_tables parse_cluster_tables(std::string_view text) {
  json doc = parse_document(text, file);
  strict_object top(doc, file);
  cluster_tables t;
  // A user's file may hold only clusters: link kinds and fabrics then come from the built-in file.
  if (top.has("link_kinds")) {
    const json& kinds = array_at(top, "link_kinds");
    for (std::size_t i = 0; i < kinds.size(); ++i) {
      link_kind_spec k = parse_link_kind(kinds[i], fmt::format("{}: link_kinds[{}]", file, i));
      if (std::any_of(t.link_kinds.begin(), t.link_kinds.end(), [&](const link_kind_spec& x) { return x.kind == k.kind; }))
        throw input_error(fmt::format("{}: link kind '{}' is listed twice", file, intra_link_name(k.kind)));
      t.link_kinds.push_back(std::move(k));
    }
  }
  if (top.has("fabrics")) {
    const json& fabrics = array_at(top, "fabrics");
    for (std::size_t i = 0; i < fabrics.size(); ++i) {
      fabric_spec f = parse_fabric_entry(fabrics[i], fmt::format("{}: fabrics[{}]", file, i));
      if (std::any_of(t.fabrics.begin(), t.fabrics.end(), [&](const fabric_spec& x) { return x.kind == f.kind; }))
        throw input_error(fmt::format("{}: fabric '{}' is listed twice", file, fabric_name(f.kind)));
      t.fabrics.push_back(std::move(f));
    }
  }
  const json& clusters = array_at(top, "clusters");
  top.finish();
  for (std::size_t i = 0; i < clusters.size(); ++i) {
    cluster_spec c = parse_cluster(clusters[i], fmt::format("{}: clusters[{}]", file, i));
    if (std::any_of(t.clusters.begin(), t.clusters.end(), [&](const cluster_spec& x) { return same_name(x.name, c.name); }))
      throw input_error(fmt::format("{}: cluster '{}' is listed twice", file, c.name));
    t.clusters.push_back(std::move(c));
  }
  return t;
}

void merge_cluster_tables(cluster_tables& into, cluster_tables from) {
  merge_by(into.link_kinds, std::move(from.link_kinds), [](const link_kind_spec& k) { return k.kind; });
  merge_by(into.fabrics, std::move(from.fabrics), [](const fabric_spec& f) { return f.kind; });
  merge_by(into.clusters, std::move(from.clusters), [](const cluster_spec& c) { return c.name; });
}

void resolve_cluster_tables(cluster_tables& t, const std::vector<gpu_spec>& gpus) {
  auto find_cluster = [&](std::string_view name) -> const cluster_spec* {
    for (const cluster_spec& c : t.clusters)
      if (same_name(c.name, name)) return &c;
    return nullptr;
  };
  for (cluster_spec& c : t.clusters) {
    const std::string at = fmt::format("{}: cluster '{}'", file, c.name);
    auto kind = std::find_if(t.link_kinds.begin(), t.link_kinds.end(), [&](const link_kind_spec& k) { return k.kind == c.intra.kind; });
    if (kind == t.link_kinds.end())
      throw input_error(fmt::format("{}: intra_node: link kind '{}' has no entry in link_kinds", at, intra_link_name(c.intra.kind)));
    c.intra.spec = *kind;
    if (c.intra.nvls && kind->nvls_efficiency == 0)
      throw input_error(fmt::format("{}: intra_node: nvls on a {} link, which has no NVLS in link_kinds", at, intra_link_name(c.intra.kind)));
    auto net = std::find_if(t.fabrics.begin(), t.fabrics.end(), [&](const fabric_spec& f) { return f.kind == c.inter.kind; });
    if (net == t.fabrics.end())
      throw input_error(fmt::format("{}: inter_node: fabric '{}' has no entry in fabrics", at, fabric_name(c.inter.kind)));
    c.inter.spec = *net;
    if (std::none_of(gpus.begin(), gpus.end(), [&](const gpu_spec& g) { return same_name(g.name, c.gpu); }))
      throw input_error(fmt::format("{}: gpu '{}' is not a GPU in gpus.json", at, c.gpu));
  }
  // Baseboards after every cluster's own specs: a measured_in names a preset holding its own intra-node series.
  for (cluster_spec& c : t.clusters) {
    c.baseboard_series.clear();
    if (c.intra.measured_in.empty()) continue;
    const std::string at = fmt::format("{}: cluster '{}': intra_node: measured_in", file, c.name);
    const cluster_spec* board = find_cluster(c.intra.measured_in);
    if (!board) throw input_error(fmt::format("{} '{}' is not a cluster", at, c.intra.measured_in));
    if (board == &c || !board->intra.measured_in.empty())
      throw input_error(fmt::format("{} '{}' must name a cluster that holds its own measurements", at, c.intra.measured_in));
    if (board->intra.kind != c.intra.kind || board->intra.gbytes_per_s_per_gpu != c.intra.gbytes_per_s_per_gpu ||
        board->intra.nvls != c.intra.nvls || board->gpus_per_node != c.gpus_per_node)
      throw input_error(fmt::format("{} '{}' has another NVLink baseboard (link, rate, NVLS or GPUs per node differ)", at,
                                    c.intra.measured_in));
    for (const measured_series& s : board->series)
      if (s.scope == link_scope::intra_node) c.baseboard_series.push_back(s);
  }
  for (const gpu_spec& g : gpus)
    if (!g.node.empty() && !find_cluster(g.node))
      throw input_error(fmt::format("gpus.json: gpu '{}': node '{}' is not a cluster in clusters.json", g.name, g.node));
}

}  // namespace trainplan
