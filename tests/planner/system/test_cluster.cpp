// A cluster preset's names, its ring bandwidth from the line rate, and which measured series stand for its node
// (planner/system/cluster.hpp), against figures written out by hand or read off data/clusters.json's sources.
#include <catch2/catch.hpp>

#include "planner/system/cluster.hpp"
#include "planner/util/input_error.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using trainplan::test::data;

namespace {

// A node of 100 GB/s links whose ring reaches 0.8 of them with P2P and 0.4 staged through host memory.
cluster_spec line_rate_node(std::optional<bool> p2p) {
  cluster_spec c;
  c.name = "test-node";
  c.gpus_per_node = 8;
  c.intra.gbytes_per_s_per_gpu = 100;
  c.intra.p2p = p2p;
  c.intra.spec.ring_efficiency = 0.8;
  c.intra.spec.ring_efficiency_without_p2p = 0.4;
  return c;
}

measured_series sweep_of(std::uint64_t gpus, std::size_t points, nccl_algorithm a = nccl_algorithm::nccl_default) {
  measured_series s;
  s.gpus = gpus;
  s.nodes = 1;
  s.algorithm = a;
  for (std::size_t i = 0; i < points; ++i) s.points.push_back({double(1u << (10 + i)), 1.0 + double(i), std::nullopt, "test"});
  return s;
}

}  // namespace

TEST_CASE("cluster names parse in any case and an unknown one lists the known ones", "[cluster]") {
  CHECK(parse_intra_link("NVLink4", "test") == intra_link::nvlink4);
  CHECK(parse_fabric("InfiniBand-NDR", "test") == fabric::infiniband_ndr);
  CHECK(parse_nccl_generation("hopper", "test") == nccl_generation::hopper);
  CHECK(parse_nccl_algorithm("collnet-chain", "test") == nccl_algorithm::collnet_chain);
  CHECK(parse_link_scope("inter_node", "test") == link_scope::inter_node);
  for (intra_link k : {intra_link::nvlink3, intra_link::nvlink4, intra_link::nvlink5, intra_link::pcie4, intra_link::pcie5})
    CHECK(parse_intra_link(intra_link_name(k), "test") == k);
  CHECK(fabric_name(fabric::efa_v2) == "efa-v2");
  CHECK_THROWS_AS(parse_fabric("infiniband-xdr", "where"), input_error);
  CHECK_THROWS_WITH(parse_fabric("infiniband-xdr", "clusters.json: x"),
                    Catch::Contains("clusters.json: x") && Catch::Contains("infiniband-ndr"));
  CHECK_THROWS_WITH(parse_intra_link("nvlink6", "where"), Catch::Contains("nvlink5"));
}

TEST_CASE("the ring's line-rate bandwidth takes the slower efficiency unless P2P is verified", "[cluster]") {
  // 100 GB/s x 0.8 with P2P; x 0.4 without, and where P2P is not verified (null in the data): the slower figure
  // stands until a measurement says otherwise.
  CHECK(line_rate_node(true).ring_gbytes_per_s_from_line() == Approx(80));
  CHECK(line_rate_node(false).ring_gbytes_per_s_from_line() == Approx(40));
  CHECK(line_rate_node(std::nullopt).ring_gbytes_per_s_from_line() == Approx(40));
  // DGX H100: 450 GB/s one-way NVLink4 x 0.81 (data/clusters.json link_kinds nvlink4: 367.2 GB/s ring busbw on
  // 8 H200s over 450 GB/s, ml-engineering network/README.md) = 364.5 GB/s.
  CHECK(data().cluster("dgx-h100").ring_gbytes_per_s_from_line() == Approx(450 * 0.81));
  // An L40S box: PCIe 4.0 x16, 31 GB/s one way, P2P not verified: staged through host memory, x 0.45 (8x RTX 5090
  // reached 28 of 63 GB/s, NVIDIA/nccl#1639).
  CHECK(data().cluster("pcie-l40s-8x").ring_gbytes_per_s_from_line() == Approx(31 * 0.45));
}

TEST_CASE("the intra-node sweep is the all-reduce on all the node's GPUs under NCCL's own choice with the most points",
          "[cluster]") {
  cluster_spec c = line_rate_node(true);
  CHECK(c.intra_sweep() == nullptr);
  c.series.push_back(sweep_of(8, 3));                          // too few sizes to interpolate: a plateau figure
  c.series.push_back(sweep_of(4, 10));                         // half the node
  c.series.push_back(sweep_of(8, 10, nccl_algorithm::ring));   // a forced or recorded algorithm
  measured_series patched = sweep_of(8, 12);
  patched.stock = false;                                       // a modified driver
  c.series.push_back(patched);
  measured_series gather = sweep_of(8, 12);
  gather.coll = collective::all_gather;
  c.series.push_back(gather);
  CHECK(c.intra_sweep() == nullptr);
  c.series.push_back(sweep_of(8, 5));
  c.series.push_back(sweep_of(8, 6));
  REQUIRE(c.intra_sweep() != nullptr);
  CHECK(c.intra_sweep()->points.size() == 6);
  // Its own sweep wins over a longer one of its baseboard; the baseboard's stands where it has none.
  c.baseboard_series.push_back(sweep_of(8, 20));
  CHECK(c.intra_sweep()->points.size() == 6);
  c.series.clear();
  CHECK(c.intra_sweep()->points.size() == 20);
}

TEST_CASE("the presets' intra-node sweeps are the measured tables their sources give", "[cluster]") {
  // DGX H100's 8-GPU all-reduce from 1 KiB: 0.07 GB/s, up to 478.87 GB/s at 8 GiB (the table in data/clusters.json).
  const measured_series* h100 = data().cluster("dgx-h100").intra_sweep();
  REQUIRE(h100 != nullptr);
  CHECK(h100->points.front().message_bytes == 1024);
  CHECK(h100->points.front().bus_gbytes_per_s == 0.07);
  CHECK(h100->points.back().bus_gbytes_per_s == 478.87);
  // AWS p5 names the DGX H100 baseboard (measured_in): the same sweep.
  const measured_series* p5 = data().cluster("aws-p5.48xlarge").intra_sweep();
  REQUIRE(p5 != nullptr);
  CHECK(p5->points.size() == h100->points.size());
  CHECK(p5->points.back().bus_gbytes_per_s == 478.87);
  // Azure ND H200 v5 names the HGX H200 baseboard but has its own 24-point table (1 KiB to 8 GiB): its own wins.
  const measured_series* nd = data().cluster("azure-nd-h200-v5").intra_sweep();
  REQUIRE(nd != nullptr);
  CHECK(nd->points.size() == 24);
  CHECK(nd->points.back().bus_gbytes_per_s == 479.98);
  // The RTX 4090 box has only single sizes, one of them on a patched driver: no sweep.
  CHECK(data().cluster("pcie-4090-8x").intra_sweep() == nullptr);
}

TEST_CASE("the large-message ring figure is the mean of the runs at the largest measured size", "[cluster]") {
  // HGX H200 (ml-engineering network/README.md @744d01e1 lines 923-990): ring all-reduce runs at 8 GiB on 4 to 8
  // GPUs and one at 16 GiB, 367.2 GB/s: the largest size alone counts.
  const cluster_spec& h200 = data().cluster("hgx-h200");
  CHECK(h200.intra_large_message_gbytes_per_s(collective::all_reduce, nccl_algorithm::ring) == Approx(367.2));
  CHECK(h200.intra_large_message_gbytes_per_s(collective::all_gather, nccl_algorithm::ring) == Approx(361.4));
  CHECK(h200.intra_large_message_gbytes_per_s(collective::reduce_scatter, nccl_algorithm::ring) == Approx(362.9));
  // HGX B200 (same file, lines 933-941): seven ring runs at 8 GiB on 4 to 8 GPUs, 673.2 673.8 677.8 677.8 677.8
  // 680.5 682.2 GB/s: their mean, 4743.1 / 7.
  const double b200_ring = 4743.1 / 7;
  CHECK(data().cluster("hgx-b200").intra_large_message_gbytes_per_s(collective::all_reduce, nccl_algorithm::ring) ==
        Approx(b200_ring));
  // p6-b200 holds no intra-node run of its own: its baseboard's (measured_in hgx-b200).
  CHECK(data().cluster("aws-p6-b200.48xlarge").intra_large_message_gbytes_per_s(collective::all_reduce, nccl_algorithm::ring) ==
        Approx(b200_ring));
  // Nothing forced to ring on DGX H100; the patched-driver 4090 run is not stock.
  CHECK_FALSE(data().cluster("dgx-h100").intra_large_message_gbytes_per_s(collective::all_reduce, nccl_algorithm::ring));
  CHECK_FALSE(data().cluster("pcie-4090-8x").intra_large_message_gbytes_per_s(collective::all_reduce, nccl_algorithm::nccl_default));
}

TEST_CASE("a node's network bandwidth is its NICs' line rate in bytes", "[cluster]") {
  // DGX H100: 8 ConnectX-7 at 400 Gb/s = 3200 Gb/s = 400 GB/s one way. AWS p5: 32 EFA at 100 Gb/s, the same.
  CHECK(data().cluster("dgx-h100").inter.node_gbytes_per_s() == Approx(400));
  CHECK(data().cluster("aws-p5.48xlarge").inter.node_gbytes_per_s() == Approx(400));
  CHECK(data().cluster("dgx-h100").has_network());
  CHECK_FALSE(data().cluster("pcie-4090-8x").has_network());
}
