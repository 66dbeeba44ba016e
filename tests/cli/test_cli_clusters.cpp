// `plan clusters` (the presets, as a table and as JSON), `plan clusters --check` (the collective model against the
// measured runs), and the main command's --cluster, --nodes and --gpus-per-node, run as a user runs them.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "expect_refused.hpp"
#include "run_plan.hpp"

using namespace trainplan::test;
using json = nlohmann::json;

namespace {

// data/clusters.json read directly, not through the planner's reader.
json clusters_file() {
  return json::parse(slurp(std::string(TRAINPLAN_SOURCE_DIR) + "/data/clusters.json"));
}

}  // namespace

TEST_CASE("plan clusters lists every preset of data/clusters.json with its node", "[cli][clusters]") {
  const plan_run r = run_plan("clusters");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  const std::vector<std::string> lines = lines_of(r.out);
  REQUIRE_FALSE(lines.empty());
  CHECK_THAT(lines.front(), Catch::StartsWith("name"));
  const json file = clusters_file();
  for (const json& c : file["clusters"]) {
    const std::string name = c["name"];
    INFO(name);
    const auto row = std::find_if(lines.begin(), lines.end(), [&](const std::string& l) { return l.rfind(name + " ", 0) == 0; });
    REQUIRE(row != lines.end());
    CHECK_THAT(*row, Catch::Contains(c["gpu"].get<std::string>()));
  }
  // DGX H100: NVLink4 at 450 GB/s with NVLS, 8 x 400 Gb/s InfiniBand NDR; the RTX 4090 box has no network.
  CHECK_THAT(r.out, Catch::Contains("nvlink4 450 GB/s NVLS"));
  CHECK_THAT(r.out, Catch::Contains("8 x 400 Gb/s infiniband-ndr"));
  CHECK_THAT(r.out, Catch::Contains("none (one box)"));
}

TEST_CASE("plan clusters --json gives each preset's links as the file writes them", "[cli][clusters]") {
  const plan_run r = run_plan("clusters --json");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json out = json::parse(r.out);
  const json file = clusters_file();
  REQUIRE(out.is_array());
  REQUIRE(out.size() == file["clusters"].size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    const json& c = file["clusters"][i];
    INFO(c["name"]);
    CHECK(out[i]["name"] == c["name"]);
    CHECK(out[i]["gpu"] == c["gpu"]);
    CHECK(out[i]["gpus_per_node"] == c["gpus_per_node"]);
    CHECK(out[i]["intra_node"]["kind"] == c["intra_node"]["kind"]);
    CHECK(out[i]["intra_node"]["gbytes_per_s_per_gpu"] == c["intra_node"]["gbytes_per_s_per_gpu"]);
    CHECK(out[i]["intra_node"]["nvls"] == c["intra_node"]["nvls"]);
    CHECK(out[i]["intra_node"]["p2p"] == c["intra_node"]["p2p"]);
    CHECK(out[i]["inter_node"]["kind"] == c["inter_node"]["kind"]);
    CHECK(out[i]["inter_node"]["nics_per_node"] == c["inter_node"]["nics_per_node"]);
    CHECK(out[i]["inter_node"]["gbits_per_s_per_nic"] == c["inter_node"]["gbits_per_s_per_nic"]);
    // Its own points, and its baseboard's intra-node ones where it names one (measured_in).
    std::size_t points = 0;
    for (const json& s : c["series"]) points += s["points"].size();
    if (c["intra_node"].contains("measured_in"))
      for (const json& board : file["clusters"])
        if (board["name"] == c["intra_node"]["measured_in"])
          for (const json& s : board["series"])
            if (s["scope"] == "intra_node") points += s["points"].size();
    CHECK(out[i]["measured_points"] == points);
  }
}

TEST_CASE("plan clusters --check prints a row per measured point and the error summary", "[cli][clusters]") {
  const plan_run r = run_plan("clusters --check");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("median |error|"));
  // The summary's groups: role, scope, size band.
  CHECK_THAT(r.out, Catch::Contains("leave-one-out intra-node  >= 256 MiB"));
  CHECK_THAT(r.out, Catch::Contains("held out      inter-node  < 1 MiB"));
  // --json: one object per point with a time or a busbw above 0 in the presets' own series.
  const plan_run j = run_plan("clusters --check --json");
  REQUIRE(j.exit_code == 0);
  const json rows = json::parse(j.out);
  std::size_t points = 0;
  const json file = clusters_file();
  for (const json& c : file["clusters"])
    for (const json& s : c["series"])
      for (const json& p : s["points"])
        if (p["bus_gbytes_per_s"].get<double>() > 0 || p.contains("time_us")) ++points;
  CHECK(rows.size() == points);
  std::set<std::string> roles;
  for (const json& row : rows) {
    roles.insert(row["role"].get<std::string>());
    CHECK(row["measured_seconds"].get<double>() > 0);
    CHECK(row["predicted_seconds"].get<double>() > 0);
    CHECK(row["error"].get<double>() == Approx(row["predicted_seconds"].get<double>() / row["measured_seconds"].get<double>() - 1));
    CHECK_FALSE(row["source"].get<std::string>().empty());
  }
  CHECK(roles == std::set<std::string>{"held out", "leave-one-out", "source", "forced", "modified"});
}

TEST_CASE("plan --cluster names the node a run is planned on", "[cli][clusters]") {
  const plan_run r = run_plan("--model gpt2 --seq 1024 --cluster dgx-h100 --nodes 2 --gpus-per-node 4");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("cluster dgx-h100: 2 nodes x 4 h100 GPUs"));
  // --cluster names the GPU: an H200 preset plans on H200s, in any case.
  const json h200 = json::parse(run_plan("--model gpt2 --seq 1024 --cluster HGX-H200 --json").out);
  CHECK(h200["gpu"]["name"] == "h200");
}

TEST_CASE("plan --cluster refuses an unknown name, saying which was meant", "[cli][clusters][errors]") {
  expect_refused("--model gpt2 --cluster dgx-h10", {"--cluster", "unknown cluster 'dgx-h10'", "dgx-a100", "did you mean 'dgx-h100'"});
  expect_refused("--model gpt2 --cluster tpu-v5");
}

TEST_CASE("plan --cluster refuses GPUs its nodes cannot hold", "[cli][clusters][errors]") {
  // 9 GPUs on 8-GPU nodes: 2 nodes, which 9 does not split evenly.
  expect_refused("--model gpt2 --cluster dgx-h100 --gpus 9", {"--gpus 9", "2 nodes of 8 GPUs"});
  // --nodes x --gpus-per-node must be --gpus.
  expect_refused("--model gpt2 --cluster dgx-h100 --nodes 2 --gpus-per-node 4 --gpus 16",
                 {"--nodes 2 x 4 GPUs per node = 8 GPUs", "--gpus 16"});
  expect_refused("--model gpt2 --cluster dgx-h100 --gpus-per-node 9", {"--gpus-per-node 9", "1 to 8 GPUs"});
  expect_refused("--model gpt2 --cluster dgx-h100 --gpus-per-node 0", {"--gpus-per-node"});
  expect_refused("--model gpt2 --cluster dgx-h100 --nodes 0", {"--nodes"});
  // A box without a network holds one node.
  expect_refused("--model gpt2 --cluster pcie-4090-8x --nodes 2", {"pcie-4090-8x", "no network"});
  expect_refused("--model gpt2 --cluster pcie-4090-8x --gpus 16", {"pcie-4090-8x", "no network"});
  // --gpu must be the preset's.
  expect_refused("--model gpt2 --cluster dgx-h100 --gpu a100-80gb", {"--gpu a100-80gb contradicts --cluster dgx-h100"});
  // A GPU with no usual node has no layout to spread over.
  expect_refused("--model gpt2 --gpu t4 --nodes 2", {"--nodes", "t4", "--cluster"});
}

TEST_CASE("plan clusters reads a user's clusters.json strictly", "[cli][clusters][errors]") {
  const auto dir = scratch_dir("trainplan-cli-clusters");
  json file = clusters_file();
  file["clusters"][0]["intra_node"]["nvlink_generation"] = 4;
  std::ofstream(dir / "clusters.json") << file.dump();
  expect_refused("clusters --data-dir " + dir.string(), {"clusters.json", "cluster 'dgx-h100'", "unknown key 'nvlink_generation'"});
  expect_refused("--model gpt2 --cluster dgx-h100 --data-dir " + dir.string(), {"clusters.json", "'nvlink_generation'"});
}
