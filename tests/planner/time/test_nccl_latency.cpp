// NCCL's latency model (planner/time/nccl_latency.hpp) against ncclTopoTuneModel worked by hand from its default
// constants (NVIDIA/nccl @5067397c, NCCL 2.30.7, src/graph/tuning.cc lines 148-212 and 384-435), in microseconds:
//   base latency      Tree LL 6.8, Simple 8.4; Ring LL 6.6, Simple 8.4; NVLS 0
//   NVLink per hop    Tree LL 0.6, Simple 4.0; Ring LL 0.6, Simple 3.4; NVLS and NVLS tree Simple 25
//   PCIe per hop      Tree LL 1.0, Simple 4.0; Ring LL 1.0, Simple 5.7
//   network per hop   Tree LL 5.0, Simple 14;  Ring LL 2.7, Simple 14;  NVLS tree Simple 20.9
#include <catch2/catch.hpp>

#include <stdexcept>

#include "planner/time/nccl_latency.hpp"

using namespace trainplan;

TEST_CASE("ring latency: a base and one hop per step, 2(n-1) steps for all-reduce and n-1 otherwise", "[nccl_latency]") {
  // 8 GPUs on NVLink, all-reduce: 14 steps. LL 6.6 + 14 x 0.6 = 15.0; Simple 8.4 + 14 x 3.4 = 56.0.
  CHECK(nccl_latency_us(comm_algorithm::ring, comm_protocol::ll, collective::all_reduce, 8, 1, true) == Approx(15.0));
  CHECK(nccl_latency_us(comm_algorithm::ring, comm_protocol::simple, collective::all_reduce, 8, 1, true) == Approx(56.0));
  // All-gather: 7 steps. Simple 8.4 + 7 x 3.4 = 32.2. On PCIe 8.4 + 7 x 5.7 = 48.3.
  CHECK(nccl_latency_us(comm_algorithm::ring, comm_protocol::simple, collective::all_gather, 8, 1, true) == Approx(32.2));
  CHECK(nccl_latency_us(comm_algorithm::ring, comm_protocol::simple, collective::reduce_scatter, 8, 1, false) == Approx(48.3));
  // One rank: nothing to wait for.
  CHECK(nccl_latency_us(comm_algorithm::ring, comm_protocol::simple, collective::all_reduce, 1, 1, true) == 0);
}

TEST_CASE("ring latency across nodes: network steps, the post overhead, and the plateau factor", "[nccl_latency]") {
  // 16 ranks on 2 nodes, all-reduce: 30 steps, 2(2-1) = 2 of them across the network. The other 28 pay at least the
  // network post overhead, 1 us on an Intel host, x3 for Simple (getNetOverhead, tuning.cc lines 226-233 and 406).
  // LL: 6.6 + 28 x max(0.6, 1) + 2 x 2.7 = 40.0.
  CHECK(nccl_latency_us(comm_algorithm::ring, comm_protocol::ll, collective::all_reduce, 16, 2, true) == Approx(40.0));
  // Simple: (8.4 + 28 x max(3.4, 3) + 2 x 14) x 1.4 (ncclTopoGetAlgoTime's ring plateau factor on Ampere and later,
  // lines 647-650) = 131.6 x 1.4 = 184.24.
  CHECK(nccl_latency_us(comm_algorithm::ring, comm_protocol::simple, collective::all_reduce, 16, 2, true) == Approx(184.24));
  // One rank a node: every hop is a network one, at the tree's network latency (line 402): 8 ranks on 8 nodes, LL
  // all-reduce: 6.6 + 14 x 5.0 = 76.6.
  CHECK(nccl_latency_us(comm_algorithm::ring, comm_protocol::ll, collective::all_reduce, 8, 8, true) == Approx(76.6));
  // All-gather on 4 nodes of 8: 31 steps, 3 across. Simple, no plateau factor: 8.4 + 28 x 3.4 + 3 x 14 = 145.6.
  CHECK(nccl_latency_us(comm_algorithm::ring, comm_protocol::simple, collective::all_gather, 32, 4, true) == Approx(145.6));
}

TEST_CASE("tree, NVLS and NVLS tree latencies", "[nccl_latency]") {
  // Tree (line 416): base + 2((ranks a node - 1) x intra + log2(nodes) x network).
  // 8 GPUs, one node, LL: 6.8 + 2 x 7 x 0.6 = 15.2. 2 nodes of 8, LL: 6.8 + 2(7 x 0.6 + 1 x 5.0) = 25.2.
  CHECK(nccl_latency_us(comm_algorithm::tree, comm_protocol::ll, collective::all_reduce, 8, 1, true) == Approx(15.2));
  CHECK(nccl_latency_us(comm_algorithm::tree, comm_protocol::ll, collective::all_reduce, 16, 2, true) == Approx(25.2));
  // 4 nodes of 8, Simple: 8.4 + 2(7 x 4.0 + 2 x 14) = 120.4. 6 nodes: floor(log2 6) = 2, the same.
  CHECK(nccl_latency_us(comm_algorithm::tree, comm_protocol::simple, collective::all_reduce, 32, 4, true) == Approx(120.4));
  CHECK(nccl_latency_us(comm_algorithm::tree, comm_protocol::simple, collective::all_reduce, 48, 6, true) == Approx(120.4));
  // NVLS (lines 424-426): the NVLink latency alone, 25. NVLS tree (line 428): 25 + 2 log2(nodes) x 20.9: 4 nodes 108.6.
  CHECK(nccl_latency_us(comm_algorithm::nvls, comm_protocol::simple, collective::all_reduce, 8, 1, true) == Approx(25.0));
  CHECK(nccl_latency_us(comm_algorithm::nvls_tree, comm_protocol::simple, collective::all_reduce, 32, 4, true) ==
        Approx(108.6));
  // Point-to-point: one LL ring step, 6.6 + 0.6 on NVLink, 6.6 + 2.7 across nodes.
  CHECK(nccl_latency_us(comm_algorithm::p2p, comm_protocol::ll, collective::send_recv, 2, 1, true) == Approx(7.2));
  CHECK(nccl_latency_us(comm_algorithm::p2p, comm_protocol::ll, collective::all_to_all, 16, 2, true) == Approx(9.3));
}

TEST_CASE("an algorithm a collective does not run is refused", "[nccl_latency]") {
  CHECK_THROWS_AS(nccl_latency_us(comm_algorithm::tree, comm_protocol::ll, collective::all_gather, 8, 1, true),
                  std::invalid_argument);
  CHECK_THROWS_AS(nccl_latency_us(comm_algorithm::nvls, comm_protocol::simple, collective::reduce_scatter, 8, 1, true),
                  std::invalid_argument);
  CHECK_THROWS_AS(nccl_latency_us(comm_algorithm::nvls, comm_protocol::simple, collective::all_reduce, 16, 2, true),
                  std::invalid_argument);
  CHECK_THROWS_AS(nccl_latency_us(comm_algorithm::ring, comm_protocol::ll, collective::all_to_all, 8, 1, true),
                  std::invalid_argument);
}

TEST_CASE("LL's bandwidth cap is llMaxBw by GPU generation in a node and by host across nodes", "[nccl_latency]") {
  // tuning.cc lines 177-183: Ampere-N1 87.7, Hopper-N1 141, Blackwell-N1 2 x 141; Intel-N2 39.0, Intel-N4 20.4.
  CHECK(nccl_ll_max_gbytes_per_s(nccl_generation::ampere, 1) == Approx(87.7));
  CHECK(nccl_ll_max_gbytes_per_s(nccl_generation::hopper, 1) == Approx(141.0));
  CHECK(nccl_ll_max_gbytes_per_s(nccl_generation::blackwell, 1) == Approx(282.0));
  CHECK(nccl_ll_max_gbytes_per_s(nccl_generation::hopper, 2) == Approx(39.0));
  CHECK(nccl_ll_max_gbytes_per_s(nccl_generation::hopper, 3) == Approx(20.4));
  CHECK(nccl_ll_max_gbytes_per_s(nccl_generation::blackwell, 16) == Approx(20.4));
}
