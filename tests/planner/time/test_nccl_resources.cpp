// What NCCL takes from each GPU (planner/time/nccl_resources.hpp): its connection buffers and the SMs its kernels
// hold, each figure derived by hand from NCCL's defaults (NVIDIA/nccl @5067397c, NCCL 2.30.7).
#include <catch2/catch.hpp>

#include "planner/time/nccl_resources.hpp"
#include "planner/util/input_error.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using trainplan::test::data;

namespace {

constexpr double kib = 1024.0, mib = 1024.0 * kib;

// One directed connection between two ranks on one channel. The receiver holds a buffer for each protocol
// (src/init.cc lines 810-824, src/include/device.h):
//   LL      NCCL_LL_LINES_PER_THREAD 8 x NCCL_LL_MAX_NTHREADS 512 x NCCL_STEPS 8 x 16 B (ncclLLFifoLine) = 524,288 B
//   LL128   NCCL_LL128_ELEMS_PER_THREAD 120 x NCCL_LL128_MAX_NTHREADS 640 x 8 steps x 8 B      = 4,915,200 B
//   Simple  NCCL_BUFFSIZE, DEFAULT_BUFFSIZE 1 << 22                                            = 4,194,304 B
// 9,633,792 B and the few-KiB ncclRecvMem, rounded up to CUDA_IPC_MIN, 2 MiB (src/include/comm.h line 46;
// p2pRecvSetup's ALIGN_SIZE, src/transport/p2p.cc): 10 MiB. The sender's ncclSendMem rounds up to 2 MiB
// (p2pSendSetup). Where P2P read moves the Simple buffer to the sender, 2 + 4 -> 6 MiB and 0.5 + 4.7 -> 6 MiB: 12 MiB
// either way. NVIDIA/nccl#1685 logs exactly 10,485,760 and 2,097,152 B allocations per channel per peer on 8 H100s.
constexpr double connection_bytes = 10 * mib + 2 * mib;
static_assert(8 * 512 * 8 * 16 + 120 * 640 * 8 * 8 + (1 << 22) == 9633792);

// NVLS (ncclNvlsBufferSetup, src/transport/nvls.cc lines 409-437): NCCL_NVLS_CHUNKSIZE 128 KiB x NCCL_STEPS 8 per
// step buffer, 2 (reduce and broadcast) per channel, per head: one head per GPU of the node.
constexpr double nvls_bytes_per_channel_head = 2 * 128 * kib * 8;

}  // namespace

TEST_CASE("NCCL's ring buffers: 12 MiB a channel, the link kind's channels in one node", "[nccl_resources]") {
  const cluster_spec& h100 = data().cluster("dgx-h100");
  // NVLink4 runs 24 ring channels (data/clusters.json link_kinds nvlink4, from NCCL's search: 6 at 60 GB/s,
  // duplicated to 12 and doubled when the rings connect): 24 x 12 MiB = 288 MiB.
  CHECK(nccl_buffer_bytes(h100, {8, 1}, false) == 24 * connection_bytes);
  CHECK(nccl_buffer_bytes(h100, {8, 1}, false) == 288 * mib);
  CHECK(nccl_buffer_bytes(h100, {2, 1}, false) == 288 * mib);  // the same channels whatever the GPU count
  // NVLS adds 16 channels (NVLS_NCHANNELS_SM90, nvls.cc line 155) x 2 x 128 KiB x 8 x 8 heads = 256 MiB.
  CHECK(nccl_buffer_bytes(h100, {8, 1}, true) == 288 * mib + 16 * nvls_bytes_per_channel_head * 8);
  CHECK(nccl_buffer_bytes(h100, {8, 1}, true) == 544 * mib);
  // A PCIe box: one ring channel below 25 GB/s, doubled when the rings connect: 2 x 12 MiB.
  CHECK(nccl_buffer_bytes(data().cluster("pcie-l40s-8x"), {8, 1}, false) == 24 * mib);
  // A communicator of one rank connects nothing.
  CHECK(nccl_buffer_bytes(h100, {1, 1}, false) == 0);
  CHECK(nccl_buffer_bytes(h100, {1, 1}, true) == 0);
}

TEST_CASE("across nodes NCCL runs two channels per NIC, and the trees connect their own", "[nccl_resources]") {
  const cluster_spec& h100 = data().cluster("dgx-h100");
  // 8 GPUs of a node with all 8 NICs: 2 x 8 = 16 channels (below the node's 24), each with a ring and a tree
  // connection: 16 x 12 MiB x 2 = 384 MiB.
  CHECK(nccl_buffer_bytes(h100, {16, 2}, false) == 16 * connection_bytes * 2);
  CHECK(nccl_buffer_bytes(h100, {16, 2}, false) == 384 * mib);
  // With NVLS tree: 16 NVLS channels between nodes too, 8 heads: + 256 MiB.
  CHECK(nccl_buffer_bytes(h100, {16, 2}, true) == 640 * mib);
  // 4 GPUs a node have half the NICs: 2 x 4 = 8 channels: 8 x 12 x 2 = 192 MiB.
  CHECK(nccl_buffer_bytes(h100, {16, 4}, false) == 192 * mib);
  // One GPU a node (a data-parallel group across nodes) has one NIC: 2 channels, 48 MiB.
  CHECK(nccl_buffer_bytes(h100, {8, 8}, false) == 48 * mib);
  // AWS p4d: 4 NICs for 8 GPUs. All 8 a node: 2 x 4 = 8 channels, 192 MiB; one a node still has one NIC.
  CHECK(nccl_buffer_bytes(data().cluster("aws-p4d.24xlarge"), {16, 2}, false) == 192 * mib);
  CHECK(nccl_buffer_bytes(data().cluster("aws-p4d.24xlarge"), {8, 8}, false) == 48 * mib);
}

TEST_CASE("NCCL's point-to-point buffers: 12 MiB per peer per channel, the ring's channels rounded up to a power of two",
          "[nccl_resources]") {
  // ncclTopoComputeP2pChannels (src/graph/paths.cc lines 977-990) rounds the channels to a power of two: 24 -> 32 on
  // NVLink4. NVIDIA/nccl#1685's 8x H100 all-to-all log connects channels 00 to 31 per pair of GPUs. Each rank then
  // holds 7 peers x 32 x 12 MiB = 2,688 MiB (the issue saw about 3.3 GB more device memory after the first
  // all-to-all).
  const cluster_spec& h100 = data().cluster("dgx-h100");
  CHECK(nccl_p2p_buffer_bytes(h100, {8, 1}) == 7 * 32 * connection_bytes);
  CHECK(nccl_p2p_buffer_bytes(h100, {8, 1}) == 2688 * mib);
  CHECK(nccl_p2p_buffer_bytes(h100, {2, 1}) == 384 * mib);
  // Network peers share one small pool, not counted: one GPU a node has no NVLink peer.
  CHECK(nccl_p2p_buffer_bytes(h100, {8, 8}) == 0);
  CHECK(nccl_p2p_buffer_bytes(h100, {16, 2}) == 7 * 32 * connection_bytes);
  CHECK(nccl_p2p_buffer_bytes(h100, {1, 1}) == 0);
  // PCIe: 2 channels, already a power of two; 3 peers in a 4-GPU box: 3 x 2 x 12 = 72 MiB.
  CHECK(nccl_p2p_buffer_bytes(data().cluster("pcie-4090-4x"), {4, 1}) == 72 * mib);
}

TEST_CASE("NCCL's share of the SMs: one per CTA, one CTA per channel", "[nccl_resources]") {
  // H100 SXM5: 132 SMs (NVIDIA H100 architecture whitepaper; gpus.json sm_count).
  const cluster_spec& h100 = data().cluster("dgx-h100");
  const std::uint32_t h100_sms = 132;
  REQUIRE(data().gpu("h100").sm_count == h100_sms);
  // All-reduce on 8 GPUs runs NVLS: 16 CTAs (NVLS_NCHANNELS_SM90). On 4 it rings: 24.
  CHECK(nccl_ctas(h100, collective::all_reduce, {8, 1}) == 16);
  CHECK(nccl_sm_fraction(h100, collective::all_reduce, {8, 1}, h100_sms) == Approx(16.0 / 132));
  CHECK(nccl_sm_fraction(h100, collective::all_reduce, {4, 1}, h100_sms) == Approx(24.0 / 132));
  CHECK(nccl_sm_fraction(h100, collective::all_gather, {8, 1}, h100_sms) == Approx(24.0 / 132));
  CHECK(nccl_sm_fraction(h100, collective::reduce_scatter, {16, 2}, h100_sms) == Approx(16.0 / 132));  // 2 per NIC
  CHECK(nccl_sm_fraction(h100, collective::all_to_all, {8, 1}, h100_sms) == Approx(32.0 / 132));
  // Send/recv to another node: NCCL_NCHANNELS_PER_NET_PEER, 2 (NVIDIA/nccl#1424); inside the node all 32.
  CHECK(nccl_ctas(h100, collective::send_recv, {2, 2}) == 2);
  CHECK(nccl_ctas(h100, collective::send_recv, {2, 1}) == 32);
  CHECK(nccl_ctas(h100, collective::all_reduce, {1, 1}) == 0);
  // B200: 148 SMs; NVLS 24 CTAs in one NVLink domain, 32 beyond it (NVLS_NCHANNELS_SM100_NVL and
  // NVLS_NCHANNELS_SM100, nvls.cc lines 156-157).
  const cluster_spec& b200 = data().cluster("hgx-b200");
  CHECK(nccl_sm_fraction(b200, collective::all_reduce, {8, 1}, 148) == Approx(24.0 / 148));
  CHECK(nccl_sm_fraction(b200, collective::all_reduce, {16, 2}, 148) == Approx(32.0 / 148));
  // Never more than the whole GPU; an unknown SM count is refused.
  CHECK(nccl_sm_fraction(h100, collective::all_reduce, {4, 1}, 10) == 1);
  CHECK_THROWS_AS(nccl_sm_fraction(h100, collective::all_reduce, {8, 1}, 0), input_error);
  CHECK_THROWS_WITH(nccl_sm_fraction(h100, collective::all_reduce, {8, 1}, 0), Catch::Contains("sm_count"));
}
