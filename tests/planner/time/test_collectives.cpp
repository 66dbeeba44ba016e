// The time of one NCCL collective on a cluster preset (planner/time/collectives.hpp): which algorithm the model
// takes NCCL to pick, the hierarchical bound between nodes, the edge cases, and the bus bandwidth against hand
// derivations and measured points of data/clusters.json (each with its source there).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "planner/time/collectives.hpp"
#include "planner/util/input_error.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using trainplan::test::data;

namespace {

constexpr double kib = 1024.0, mib = 1024.0 * kib, gib = 1024.0 * mib;

// An HGX-like node worked by hand, with no measured series: 8 GPUs on 450 GB/s NVLink4 whose ring reaches 0.8 of it
// (360 GB/s busbw), no NVLS; 8 NICs of 400 Gb/s (400 GB/s a node) of which NCCL gets half (200 GB/s).
cluster_spec hand_node() {
  cluster_spec c;
  c.name = "hand-node";
  c.gpu = "h100";
  c.gpus_per_node = 8;
  c.intra.kind = intra_link::nvlink4;
  c.intra.gbytes_per_s_per_gpu = 450;
  c.intra.nvswitch = true;
  c.intra.p2p = true;
  c.intra.spec.kind = intra_link::nvlink4;
  c.intra.spec.ring_efficiency = c.intra.spec.ring_efficiency_without_p2p = 0.8;
  c.intra.spec.generation = nccl_generation::hopper;
  c.intra.spec.nccl_ring_channels = 24;
  c.inter.kind = fabric::infiniband_ndr;
  c.inter.nics_per_node = 8;
  c.inter.gbits_per_s_per_nic = 400;
  c.inter.spec.kind = fabric::infiniband_ndr;
  c.inter.spec.efficiency = 0.5;
  return c;
}

const cluster_spec& preset(const char* name) { return data().cluster(name); }

}  // namespace

TEST_CASE("one rank or no bytes takes no time", "[collectives]") {
  const cluster_spec& c = preset("dgx-h100");
  for (collective k : {collective::all_reduce, collective::all_gather, collective::reduce_scatter, collective::all_to_all}) {
    CHECK(collective_seconds(c, k, gib, {1, 1}) == 0);
    CHECK(collective_seconds(c, k, 0, {8, 1}) == 0);
    CHECK(collective_seconds(c, k, 0, {16, 2}) == 0);
    CHECK(estimate_collective(c, k, gib, {1, 1}).bus_gbytes_per_s == 0);
  }
  CHECK(collective_seconds(c, collective::send_recv, 0, {2, 2}) == 0);
}

TEST_CASE("a placement the preset cannot hold is refused with the reason", "[collectives]") {
  const cluster_spec& c = preset("dgx-h100");
  CHECK_THROWS_WITH(collective_seconds(c, collective::all_reduce, gib, {16, 1}), Catch::Contains("holds 8 GPUs"));
  CHECK_THROWS_WITH(collective_seconds(c, collective::all_reduce, gib, {12, 8}), Catch::Contains("do not spread evenly"));
  CHECK_THROWS_WITH(collective_seconds(c, collective::all_reduce, gib, {0, 1}), Catch::Contains("do not spread evenly"));
  CHECK_THROWS_WITH(collective_seconds(c, collective::all_reduce, gib, {8, 0}), Catch::Contains("do not spread evenly"));
  CHECK_THROWS_WITH(collective_seconds(c, collective::send_recv, gib, {4, 1}), Catch::Contains("between 2 ranks"));
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()})
    CHECK_THROWS_WITH(collective_seconds(c, collective::all_reduce, bad, {8, 1}), Catch::Contains("not a size"));
  // An RTX 4090 box has no network: one node only.
  CHECK_THROWS_WITH(collective_seconds(preset("pcie-4090-8x"), collective::all_reduce, gib, {16, 2}),
                    Catch::Contains("no network"));
  CHECK_THROWS_AS(collective_seconds(preset("pcie-4090-8x"), collective::all_reduce, gib, {16, 2}), input_error);
}

TEST_CASE("NVLS is an all-reduce on an NVLS node with more than 4 of the group's GPUs in each node", "[collectives][nvls]") {
  // NCCL stays on the ring at 4 H200s and takes NVLS from 5 (ml-engineering network/README.md @744d01e1 lines
  // 923-929, data/clusters.json hgx-h200); Ampere has no NVLS (nvlsEfficiency 0, NCCL src/graph/tuning.cc).
  const cluster_spec& h100 = preset("dgx-h100");
  CHECK(uses_nvls(h100, collective::all_reduce, {8, 1}));
  CHECK(uses_nvls(h100, collective::all_reduce, {5, 1}));
  CHECK_FALSE(uses_nvls(h100, collective::all_reduce, {4, 1}));
  CHECK(uses_nvls(h100, collective::all_reduce, {16, 2}));       // 8 a node: NVLS inside, a tree between
  CHECK_FALSE(uses_nvls(h100, collective::all_reduce, {16, 4}));  // 4 a node
  CHECK_FALSE(uses_nvls(h100, collective::all_reduce, {8, 8}));   // one a node
  CHECK_FALSE(uses_nvls(h100, collective::all_reduce, {8, 0}));
  for (collective k : {collective::all_gather, collective::reduce_scatter, collective::all_to_all})
    CHECK_FALSE(uses_nvls(h100, k, {8, 1}));
  CHECK_FALSE(uses_nvls(preset("dgx-a100"), collective::all_reduce, {8, 1}));
  CHECK_FALSE(uses_nvls(preset("pcie-l40s-8x"), collective::all_reduce, {8, 1}));

  CHECK(estimate_collective(h100, collective::all_reduce, gib, {8, 1}).algorithm == comm_algorithm::nvls);
  CHECK(estimate_collective(h100, collective::all_reduce, gib, {4, 1}).algorithm == comm_algorithm::ring);
  CHECK(estimate_collective(h100, collective::all_gather, gib, {8, 1}).algorithm == comm_algorithm::ring);
  CHECK(estimate_collective(h100, collective::all_to_all, gib, {8, 1}).algorithm == comm_algorithm::p2p);
  CHECK(estimate_collective(preset("dgx-a100"), collective::all_reduce, gib, {8, 1}).algorithm == comm_algorithm::ring);
}

TEST_CASE("inside a node the time is the measured sweep's at that size", "[collectives]") {
  // DGX H100, 8 GPUs, 1 GiB: 466.35 GB/s measured (data/clusters.json dgx-h100 series[0]); NVLS on all the node's
  // GPUs is the sweep itself: t = 1 GiB x 2(8-1)/8 / 466.35 GB/s.
  const collective_estimate e = estimate_collective(preset("dgx-h100"), collective::all_reduce, gib, {8, 1});
  CHECK(e.measured);
  CHECK(e.bus_gbytes_per_s == Approx(466.35));
  CHECK(e.seconds == Approx(gib * 1.75 / 466.35e9));
  CHECK_FALSE(e.protocol);
  // A preset measured on another's baseboard (AWS p5 on DGX H100's, measured_in) gives the same time.
  CHECK(collective_seconds(preset("aws-p5.48xlarge"), collective::all_reduce, gib, {8, 1}) == Approx(e.seconds));
}

TEST_CASE("a ring on part of an NVSwitch node runs at the ring's plateau, NVLS at the sweep's time", "[collectives]") {
  // Held-out points of the HGX H200 table (ml-engineering network/README.md @744d01e1 lines 923-929, in
  // data/clusters.json): 4 GPUs under NCCL's choice ran the ring at 363.3 GB/s at 8 GiB; the model takes the ring's
  // 16 GiB figure, 367.2 GB/s (+1.1%).
  const cluster_spec& h200 = preset("hgx-h200");
  const collective_estimate ring4 = estimate_collective(h200, collective::all_reduce, 8 * gib, {4, 1});
  CHECK(ring4.algorithm == comm_algorithm::ring);
  CHECK(ring4.bus_gbytes_per_s == Approx(363.3).epsilon(0.02));
  // NVLS on r of 8 GPUs: the switch moves S each way whatever r, so the time of 8 holds and busbw scales with
  // (r-1)/r: 475.16 x (6/7)/(7/8) = 465.5 GB/s at 7 GPUs, measured 460.0 (+1.2%); at 5 and 6 GPUs 434.4 and 452.5
  // against 414.2 and 435.6 measured (+4.9%, +3.9%): within 6%.
  const collective_estimate nvls7 = estimate_collective(h200, collective::all_reduce, 8 * gib, {7, 1});
  CHECK(nvls7.algorithm == comm_algorithm::nvls);
  CHECK(nvls7.bus_gbytes_per_s == Approx(475.16 * (6.0 / 7) / (7.0 / 8)));
  CHECK(nvls7.bus_gbytes_per_s == Approx(460.0).epsilon(0.02));
  CHECK(estimate_collective(h200, collective::all_reduce, 8 * gib, {6, 1}).bus_gbytes_per_s == Approx(435.6).epsilon(0.06));
  CHECK(estimate_collective(h200, collective::all_reduce, 8 * gib, {5, 1}).bus_gbytes_per_s == Approx(414.2).epsilon(0.06));
  // DGX H100 has no ring run: the line rate x nvlink4's efficiency, 450 x 0.81 = 364.5 GB/s, within 2% of the
  // 365-370 GB/s measured on 2 to 8 H100s (NVIDIA/nccl#1455).
  CHECK(estimate_collective(preset("dgx-h100"), collective::all_reduce, gib, {4, 1}).bus_gbytes_per_s ==
        Approx(367).epsilon(0.02));
}

TEST_CASE("without a measurement a node's collective is NCCL's latency plus the bytes at the line rate's plateau",
          "[collectives]") {
  const cluster_spec c = hand_node();
  // Ring Simple on 8 NVLink GPUs: NCCL's latency 8.4 + 2(8-1) x 3.4 = 56 us (src/graph/tuning.cc base and NVLink
  // hardware latencies); the bytes 2(8-1)/8 S at 450 x 0.8 = 360 GB/s.
  const double s = gib;
  const collective_estimate big = estimate_collective(c, collective::all_reduce, s, {8, 1});
  CHECK_FALSE(big.measured);
  REQUIRE(big.protocol);
  CHECK(*big.protocol == comm_protocol::simple);
  CHECK(big.seconds == Approx(56e-6 + s * 1.75 / 360e9));
  // 1 KiB: LL wins, 6.6 + 14 x 0.6 = 15 us of latency and half the plateau (LL sends a flag with every 8 bytes).
  const collective_estimate small = estimate_collective(c, collective::all_reduce, kib, {8, 1});
  REQUIRE(small.protocol);
  CHECK(*small.protocol == comm_protocol::ll);
  CHECK(small.seconds == Approx(15e-6 + kib * 1.75 / 141e9));  // 0.5 x 360 = 180, capped at Hopper's llMaxBw 141
  // Send/recv between 2 GPUs: one LL ring step's latency, 6.6 + 0.6 = 7.2 us, and S at the ring's plateau.
  CHECK(collective_seconds(c, collective::send_recv, s, {2, 1}) == Approx(7.2e-6 + s / 360e9));
}

TEST_CASE("between nodes a group's share of its node's NICs bounds the bus bandwidth", "[collectives][hierarchical]") {
  const cluster_spec c = hand_node();
  const double s = 16 * gib;
  // 4 nodes of 8: each node passes 2(n-1)/n S across its boundary through 0.5 x 8 x 400 Gb/s = 200 GB/s. Ring and
  // tree both reach 200; the tree pays less latency (2 log2(4) network hops, not 2(4-1) ring steps), 56 us added
  // (8.4 + 2(7 x 4 + 2 x 14) = 120.4 us, less the node's own 64.4).
  const collective_estimate four = estimate_collective(c, collective::all_reduce, s, {32, 4});
  CHECK(four.algorithm == comm_algorithm::tree);
  CHECK(four.seconds == Approx(56e-6 + s * 2 * 31 / 32 / 200e9));
  CHECK(four.bus_gbytes_per_s == Approx(200).epsilon(1e-3));
  // 4 of a node's 8 GPUs get half its NICs: 100 GB/s.
  CHECK(estimate_collective(c, collective::all_reduce, s, {16, 4}).bus_gbytes_per_s == Approx(100).epsilon(1e-3));
  // All-gather and reduce-scatter ring through the same 200 GB/s; their ring adds 113 us of latency (8.4 + 28 x 3.4
  // + 3 x 14 = 145.6, less the node's 8.4 + 7 x 3.4 = 32.2), 0.14% of the 83 ms.
  CHECK(estimate_collective(c, collective::all_gather, s, {32, 4}).bus_gbytes_per_s == Approx(200).epsilon(0.002));
  CHECK(estimate_collective(c, collective::reduce_scatter, s, {32, 4}).bus_gbytes_per_s == Approx(200).epsilon(0.002));
  // On two nodes NCCL's trees send S across, where busbw counts 2(n-1)/n S: busbw can pass the NICs' rate
  // (NVIDIA/nccl-tests#196). Here up to 200 x 1.875 = 375, so the node's own 360 GB/s bounds it.
  const collective_estimate two = estimate_collective(c, collective::all_reduce, s, {16, 2});
  CHECK(two.algorithm == comm_algorithm::tree);
  CHECK(two.bus_gbytes_per_s > 200);
  CHECK(two.bus_gbytes_per_s == Approx(360).epsilon(0.01));
  // All-to-all on 2 nodes of 8: each rank sends S/16 to each of 15 peers, 8 of them on the other node, S/2 through
  // its own NIC share 200/8 = 25 GB/s: S/2 / 25 GB/s, plus one LL network step, 6.6 + 2.7 = 9.3 us.
  CHECK(collective_seconds(c, collective::all_to_all, gib, {16, 2}) == Approx(9.3e-6 + gib / 2 / 25e9));
  // Send/recv to the other node: one GPU's share, 25 GB/s.
  CHECK(collective_seconds(c, collective::send_recv, gib, {2, 2}) == Approx(9.3e-6 + gib / 25e9));
}

TEST_CASE("two DGX H100 nodes: trees at small sizes, NVLS trees at large ones, near the measured table",
          "[collectives][hierarchical]") {
  const cluster_spec& c = preset("dgx-h100");
  // 1 KiB, bound by the node's own measured time: what the network adds decides (NCCL src/graph/tuning.cc
  // ncclTopoTuneModel, LL). Tree: 6.8 + 2(7 x 0.6 + 1 x 5.0) = 25.2 us against 15.2 in one node, +10 us. Ring:
  // 6.6 + 28 x 1.0 (the network post overhead) + 2 x 2.7 = 40.0 against 6.6 + 14 x 0.6 = 15.0, +25 us. NVLS tree:
  // 25 + 2 x 20.9 = 66.8 against 25, +41.8 us. The tree wins.
  const collective_estimate small = estimate_collective(c, collective::all_reduce, kib, {16, 2});
  CHECK(small.algorithm == comm_algorithm::tree);
  REQUIRE(small.protocol);
  CHECK(*small.protocol == comm_protocol::ll);
  // 8 GiB: NVLS inside each node at the sweep's 478.87 GB/s, the two-node tree's NIC bound 0.95 x 400 x 1.875 =
  // 712.5 GB/s above it. Measured: 467.54 GB/s on 2 DGX H100 nodes (data/clusters.json dgx-h100 series[1]), above
  // the 400 GB/s of the NICs, as nccl-tests#196 explains.
  const collective_estimate big = estimate_collective(c, collective::all_reduce, 8 * gib, {16, 2});
  CHECK(big.algorithm == comm_algorithm::nvls_tree);
  CHECK(big.bus_gbytes_per_s > 400);
  CHECK(big.bus_gbytes_per_s == Approx(467.54).epsilon(0.03));
}

TEST_CASE("a collective takes no less time for more bytes", "[collectives]") {
  // Sizes from 1 B to 16 GiB in steps of 2^(1/4), across every measured stretch of the sweeps.
  struct group_case {
    const char* cluster;
    collective coll;
    group_placement group;
  };
  const group_case cases[] = {
      {"dgx-h100", collective::all_reduce, {8, 1}},          {"dgx-h100", collective::all_reduce, {4, 1}},
      {"dgx-h100", collective::all_reduce, {16, 2}},         {"dgx-h100", collective::all_reduce, {64, 8}},
      {"dgx-h100", collective::all_gather, {8, 1}},          {"dgx-h100", collective::reduce_scatter, {32, 4}},
      {"dgx-h100", collective::all_to_all, {16, 2}},         {"dgx-h100", collective::send_recv, {2, 2}},
      {"dgx-a100", collective::all_reduce, {8, 1}},          {"azure-nd-a100-v4", collective::all_reduce, {8, 1}},
      {"hgx-b200", collective::all_reduce, {8, 1}},          {"hgx-b200", collective::all_reduce, {6, 1}},
      {"azure-nd-h200-v5", collective::all_reduce, {8, 1}},  {"aws-p4d.24xlarge", collective::all_reduce, {32, 4}},
      {"pcie-l40s-8x", collective::all_reduce, {8, 1}},      {"pcie-4090-4x", collective::send_recv, {2, 1}},
      {"gcp-a3-highgpu-8g", collective::all_gather, {16, 2}}};
  for (const group_case& k : cases) {
    double previous = 0;
    for (double bytes = 1; bytes <= 16 * gib; bytes *= std::pow(2.0, 0.25)) {
      const double t = collective_seconds(preset(k.cluster), k.coll, bytes, k.group);
      INFO(k.cluster << " " << collective_name(k.coll) << " on " << k.group.ranks << "x" << k.group.nodes << " at "
                     << bytes << " B: " << t << " s after " << previous << " s");
      CHECK(t > 0);
      CHECK(t >= previous * (1 - 1e-12));  // equal below the smallest measured size, but for rounding
      previous = t;
    }
  }
}

TEST_CASE("the reported bus bandwidth is nccl-tests' of the time", "[collectives]") {
  // busbw = S x factor / t (nccl-tests doc/PERFORMANCE.md).
  const cluster_spec& c = preset("dgx-h100");
  for (const group_placement g : {group_placement{8, 1}, group_placement{4, 1}, group_placement{16, 2}, group_placement{32, 4}})
    for (collective k : {collective::all_reduce, collective::all_gather, collective::reduce_scatter})
      for (double bytes : {kib, mib, gib}) {
        const collective_estimate e = estimate_collective(c, k, bytes, g);
        CHECK(e.bus_gbytes_per_s == Approx(bytes * bus_factor(k, g.ranks) / e.seconds / 1e9));
      }
}
