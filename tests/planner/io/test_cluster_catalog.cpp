// data/clusters.json read strictly (planner/io/cluster_catalog.hpp): every malformed entry is a one-line error
// naming the file and the field; names resolve across clusters.json and gpus.json.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "planner/io/cluster_catalog.hpp"
#include "planner/util/input_error.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using trainplan::test::data;
using json = nlohmann::json;

namespace {

// A file with one NVLink4 node of 8 GPUs "x1" on InfiniBand, one measured point.
json valid_doc() {
  return json::parse(R"({
    "_comment": "keys starting with _ are comments",
    "link_kinds": [{"name": "nvlink4", "ring_efficiency": 0.81, "ring_efficiency_without_p2p": 0.81,
                    "nvls_efficiency": 1.07, "nccl_generation": "hopper", "nccl_ring_channels": 24,
                    "nccl_nvls_channels": 16, "nccl_nvls_channels_multi_node": 16, "source": "t"}],
    "fabrics": [{"name": "none", "efficiency": 0, "source": "t"},
                {"name": "infiniband-ndr", "efficiency": 0.95, "source": "t"}],
    "clusters": [{"name": "box", "description": "d", "gpu": "x1", "gpus_per_node": 8,
      "intra_node": {"kind": "nvlink4", "gbytes_per_s_per_gpu": 450, "nvswitch": true, "nvls": true, "p2p": true,
                     "source": "t"},
      "inter_node": {"kind": "infiniband-ndr", "nics_per_node": 8, "gbits_per_s_per_nic": 400, "gpudirect_rdma": true,
                     "source": "t"},
      "series": [{"collective": "all_reduce", "scope": "intra_node", "gpus": 8, "nodes": 1, "algorithm": "default",
                  "algorithm_forced": false, "stock": true,
                  "points": [{"message_bytes": 1024, "bus_gbytes_per_s": 0.07, "source": "t"}]}],
      "statements": [], "notes": ["a note"]}]})");
}

std::vector<gpu_spec> gpus_x1(const std::string& node = "") {
  gpu_spec g;
  g.name = "x1";
  g.node = node;
  return {g};
}

cluster_tables loaded(const json& doc, const std::vector<gpu_spec>& gpus = gpus_x1()) {
  cluster_tables t = parse_cluster_tables(doc.dump());
  resolve_cluster_tables(t, gpus);
  return t;
}

// The message of the input_error that loading `doc` throws ("" when none is thrown).
std::string error_of(const json& doc, const std::vector<gpu_spec>& gpus = gpus_x1()) {
  try {
    loaded(doc, gpus);
  } catch (const input_error& e) {
    return e.what();
  }
  return "";
}

// Loading the valid document changed by `edit` fails with one line that names clusters.json and every one of `names`.
void expect_error(const std::function<void(json&)>& edit, std::initializer_list<std::string> names) {
  json doc = valid_doc();
  edit(doc);
  const std::string message = error_of(doc);
  INFO(doc.dump());
  INFO("error: " << message);
  REQUIRE_FALSE(message.empty());
  CHECK(message.find('\n') == std::string::npos);
  CHECK_THAT(message, Catch::StartsWith("clusters.json"));
  for (const std::string& name : names) CHECK_THAT(message, Catch::Contains(name));
}

json& cluster0(json& d) { return d["clusters"][0]; }

}  // namespace

TEST_CASE("a valid clusters file loads with each figure where it was written", "[cluster_catalog]") {
  const cluster_tables t = loaded(valid_doc());
  REQUIRE(t.clusters.size() == 1);
  const cluster_spec& c = t.clusters[0];
  CHECK(c.name == "box");
  CHECK(c.gpus_per_node == 8);
  CHECK(c.intra.kind == intra_link::nvlink4);
  CHECK(c.intra.gbytes_per_s_per_gpu == 450);
  CHECK(c.intra.p2p == true);
  CHECK(c.intra.spec.nccl_ring_channels == 24);  // the link kind's entry, resolved
  CHECK(c.inter.spec.efficiency == 0.95);        // the fabric's
  CHECK(c.inter.node_gbytes_per_s() == 400);
  REQUIRE(c.series.size() == 1);
  CHECK(c.series[0].points[0].bus_gbytes_per_s == 0.07);
  CHECK(c.notes == std::vector<std::string>{"a note"});
  // p2p null: not verified.
  json doc = valid_doc();
  cluster0(doc)["intra_node"]["p2p"] = nullptr;
  CHECK_FALSE(loaded(doc).clusters[0].intra.p2p.has_value());
}

TEST_CASE("an unknown key in any entry is refused naming the entry and the key", "[cluster_catalog]") {
  expect_error([](json& d) { d["colour"] = "red"; }, {"unknown key 'colour'"});
  expect_error([](json& d) { cluster0(d)["colour"] = "red"; }, {"clusters[0]", "unknown key 'colour'"});
  expect_error([](json& d) { cluster0(d)["intra_node"]["nvlink_gen"] = 4; }, {"cluster 'box'", "intra_node", "'nvlink_gen'"});
  expect_error([](json& d) { cluster0(d)["inter_node"]["nic_count"] = 8; }, {"cluster 'box'", "inter_node", "'nic_count'"});
  expect_error([](json& d) { cluster0(d)["series"][0]["points"][0]["busbw"] = 1; }, {"series[0].points[0]", "'busbw'"});
  expect_error([](json& d) { d["link_kinds"][0]["efficiency"] = 0.8; }, {"link_kinds[0]", "'efficiency'"});
  expect_error([](json& d) { d["fabrics"][1]["latency_us"] = 2; }, {"fabrics[1]", "'latency_us'"});
}

TEST_CASE("a missing field is refused naming it", "[cluster_catalog]") {
  expect_error([](json& d) { cluster0(d).erase("gpus_per_node"); }, {"clusters[0]", "missing key 'gpus_per_node'"});
  expect_error([](json& d) { cluster0(d)["intra_node"].erase("source"); }, {"intra_node", "missing key 'source'"});
  expect_error([](json& d) { cluster0(d)["inter_node"].erase("nics_per_node"); }, {"inter_node", "'nics_per_node'"});
  expect_error([](json& d) { cluster0(d)["series"][0].erase("stock"); }, {"series[0]", "'stock'"});
  expect_error([](json& d) { cluster0(d)["series"][0]["points"][0].erase("source"); }, {"points[0]", "'source'"});
  expect_error([](json& d) { d["link_kinds"][0].erase("nccl_ring_channels"); }, {"link_kinds[0]", "'nccl_ring_channels'"});
  expect_error([](json& d) { d.erase("clusters"); }, {"missing key 'clusters'"});
}

TEST_CASE("a number of the wrong kind or out of its range is refused naming the field", "[cluster_catalog]") {
  expect_error([](json& d) { cluster0(d)["intra_node"]["gbytes_per_s_per_gpu"] = "fast"; },
               {"intra_node", "'gbytes_per_s_per_gpu' must be a number"});
  expect_error([](json& d) { cluster0(d)["intra_node"]["gbytes_per_s_per_gpu"] = 0; }, {"gbytes_per_s_per_gpu must be within"});
  expect_error([](json& d) { cluster0(d)["intra_node"]["gbytes_per_s_per_gpu"] = -450; }, {"gbytes_per_s_per_gpu"});
  expect_error([](json& d) { cluster0(d)["gpus_per_node"] = 2.5; }, {"'gpus_per_node' must be a non-negative integer"});
  expect_error([](json& d) { cluster0(d)["gpus_per_node"] = -8; }, {"'gpus_per_node'"});
  expect_error([](json& d) { cluster0(d)["intra_node"]["nvls"] = "yes"; }, {"'nvls' must be true or false"});
  expect_error([](json& d) { d["link_kinds"][0]["ring_efficiency"] = 1.5; }, {"link_kinds[0]", "ring_efficiency"});
  expect_error([](json& d) { d["fabrics"][1]["efficiency"] = 0; }, {"fabrics[1]", "efficiency"});
  expect_error([](json& d) { cluster0(d)["series"][0]["points"][0]["bus_gbytes_per_s"] = -1; }, {"bus_gbytes_per_s"});
  expect_error([](json& d) { cluster0(d)["series"][0]["points"] = json::array(); }, {"series[0]", "points is empty"});
  // A number past double's range is not JSON nlohmann reads: refused as the file's syntax.
  std::string text = valid_doc().dump();
  text.replace(text.find("450"), 3, "1e400");
  CHECK_THROWS_WITH(parse_cluster_tables(text), Catch::StartsWith("clusters.json: not valid JSON"));
  CHECK_THROWS_WITH(parse_cluster_tables("{\"clusters\": [}"), Catch::StartsWith("clusters.json: not valid JSON"));
}

TEST_CASE("absurd sizes, a unit slip away from real ones, are refused", "[cluster_catalog]") {
  // Gb/s typed as b/s, bytes as bits, a data centre as a node: each past the loader's bounds.
  expect_error([](json& d) { cluster0(d)["gpus_per_node"] = 100000; }, {"gpus_per_node must be between 1 and 4096"});
  expect_error([](json& d) { cluster0(d)["gpus_per_node"] = 0; }, {"gpus_per_node"});
  expect_error([](json& d) { cluster0(d)["inter_node"]["nics_per_node"] = 5000; }, {"nics_per_node"});
  expect_error([](json& d) { cluster0(d)["inter_node"]["gbits_per_s_per_nic"] = 400e9; }, {"gbits_per_s_per_nic"});
  expect_error([](json& d) { cluster0(d)["intra_node"]["gbytes_per_s_per_gpu"] = 450e9; }, {"gbytes_per_s_per_gpu"});
  expect_error([](json& d) { cluster0(d)["series"][0]["points"][0]["message_bytes"] = 1e18; }, {"message_bytes"});
  expect_error([](json& d) { cluster0(d)["series"][0]["points"][0]["message_bytes"] = 0; }, {"message_bytes"});
  expect_error([](json& d) { d["link_kinds"][0]["nccl_ring_channels"] = 65; }, {"nccl_ring_channels"});  // MAXCHANNELS 64
  // A series on more GPUs than its nodes hold.
  expect_error([](json& d) { cluster0(d)["series"][0]["gpus"] = 16; }, {"series[0]", "16 GPUs on 1 nodes of 8"});
}

TEST_CASE("entries that contradict themselves are refused", "[cluster_catalog]") {
  expect_error([](json& d) { cluster0(d)["intra_node"]["nvswitch"] = false; }, {"nvls needs nvswitch"});
  expect_error([](json& d) { cluster0(d)["inter_node"]["kind"] = "none"; }, {"inter_node", "kind none"});
  expect_error([](json& d) { cluster0(d)["series"][0]["nodes"] = 2; cluster0(d)["series"][0]["gpus"] = 16; },
               {"series[0]", "scope intra_node goes with nodes 1"});
  expect_error([](json& d) { d["link_kinds"][0]["nccl_nvls_channels"] = 0; }, {"link_kinds[0]", "nvls_efficiency"});
  expect_error([](json& d) { cluster0(d)["name"] = "two words"; }, {"clusters[0]", "must be one word"});
  expect_error([](json& d) { cluster0(d)["series"][0]["collective"] = "allreduce"; }, {"series[0]", "all_reduce"});
}

TEST_CASE("a name listed twice is refused, whatever its case", "[cluster_catalog]") {
  expect_error([](json& d) { d["clusters"].push_back(d["clusters"][0]); }, {"cluster 'box' is listed twice"});
  expect_error(
      [](json& d) {
        d["clusters"].push_back(d["clusters"][0]);
        d["clusters"][1]["name"] = "BOX";
      },
      {"cluster 'BOX' is listed twice"});
  expect_error([](json& d) { d["link_kinds"].push_back(d["link_kinds"][0]); }, {"link kind 'nvlink4' is listed twice"});
  expect_error([](json& d) { d["fabrics"].push_back(d["fabrics"][0]); }, {"fabric 'none' is listed twice"});
}

TEST_CASE("every name resolves: link kinds, fabrics, GPUs, baseboards and each GPU's node", "[cluster_catalog]") {
  expect_error([](json& d) { cluster0(d)["gpu"] = "x9"; }, {"cluster 'box'", "gpu 'x9' is not a GPU in gpus.json"});
  expect_error([](json& d) { d["link_kinds"] = json::array(); }, {"cluster 'box'", "link kind 'nvlink4' has no entry"});
  expect_error([](json& d) { d["fabrics"].erase(1); }, {"cluster 'box'", "fabric 'infiniband-ndr' has no entry"});
  expect_error([](json& d) { cluster0(d)["intra_node"]["measured_in"] = "nowhere"; }, {"measured_in", "'nowhere' is not a cluster"});
  expect_error([](json& d) { cluster0(d)["intra_node"]["measured_in"] = "box"; }, {"measured_in", "its own measurements"});
  // A second node on the same baseboard takes the first's intra-node series; one on another baseboard is refused.
  json doc = valid_doc();
  json twin = cluster0(doc);
  twin["name"] = "twin";
  twin["series"] = json::array();
  twin["intra_node"]["measured_in"] = "box";
  doc["clusters"].push_back(twin);
  const cluster_tables t = loaded(doc);
  REQUIRE(t.clusters[1].baseboard_series.size() == 1);
  CHECK(t.clusters[1].intra_sweep() == nullptr);  // one point is no sweep
  doc["clusters"][1]["intra_node"]["gbytes_per_s_per_gpu"] = 300;
  CHECK_THAT(error_of(doc), Catch::Contains("another NVLink baseboard"));
  // A GPU's node names a cluster, or the GPU is refused (gpus.json is the file named).
  CHECK(error_of(valid_doc(), gpus_x1("box")).empty());
  const std::string bad_node = error_of(valid_doc(), gpus_x1("nope"));
  CHECK_THAT(bad_node, Catch::StartsWith("gpus.json: gpu 'x1': node 'nope' is not a cluster in clusters.json"));
  CHECK(bad_node.find('\n') == std::string::npos);
}

TEST_CASE("the built-in GPUs' nodes resolve to their presets", "[cluster_catalog]") {
  // data/gpus.json "node": H100 SXM in a DGX H100, H200 on an HGX H200, B200 on an HGX B200, the PCIe cards in
  // 8-GPU boxes; a GPU without one has no usual node.
  CHECK(data().usual_cluster(data().gpu("h100"))->name == "dgx-h100");
  CHECK(data().usual_cluster(data().gpu("h200"))->name == "hgx-h200");
  CHECK(data().usual_cluster(data().gpu("b200"))->name == "hgx-b200");
  CHECK(data().usual_cluster(data().gpu("a100-80gb"))->name == "dgx-a100");
  CHECK(data().usual_cluster(data().gpu("l40s"))->name == "pcie-l40s-8x");
  CHECK(data().usual_cluster(data().gpu("t4")) == nullptr);
  for (const gpu_spec& g : data().gpus())
    if (!g.node.empty()) {
      INFO(g.name);
      REQUIRE(data().usual_cluster(g) != nullptr);
      // The node's GPU is the GPU itself.
      CHECK(data().gpu(data().usual_cluster(g)->gpu).name == g.name);
    }
  // Every preset's GPU is in gpus.json, and every measured point carries a source.
  for (const cluster_spec& c : data().clusters()) {
    INFO(c.name);
    CHECK_NOTHROW(data().gpu(c.gpu));
    for (const measured_series& s : c.series)
      for (const measured_point& p : s.points) CHECK_FALSE(p.source.empty());
  }
}

TEST_CASE("a user's clusters replace the built-in ones of the same name, whatever its case", "[cluster_catalog]") {
  cluster_tables into = parse_cluster_tables(valid_doc().dump());
  json user = json::object();
  user["clusters"] = json::array({valid_doc()["clusters"][0]});
  user["clusters"][0]["name"] = "BOX";
  user["clusters"][0]["gpus_per_node"] = 4;
  user["clusters"][0]["series"] = json::array();
  merge_cluster_tables(into, parse_cluster_tables(user.dump()));
  REQUIRE(into.clusters.size() == 1);
  CHECK(into.clusters[0].gpus_per_node == 4);
  // Another name is added; the link kinds and fabrics stay the built-in file's.
  user["clusters"][0]["name"] = "box2";
  merge_cluster_tables(into, parse_cluster_tables(user.dump()));
  CHECK(into.clusters.size() == 2);
  CHECK(into.link_kinds.size() == 1);
  CHECK(into.fabrics.size() == 2);
  CHECK_NOTHROW(resolve_cluster_tables(into, gpus_x1()));
}
