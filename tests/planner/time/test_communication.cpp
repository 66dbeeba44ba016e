// A step's collectives overlapped with its compute (planner/time/communication.hpp): the overlap arithmetic, the
// groups' placement in Megatron's rank order, buckets, the windows from a step's ops, NCCL's memory per
// communicator. Each expectation is derived by hand in its comment.
#include <catch2/catch.hpp>

#include "planner/time/communication.hpp"
#include "planner/time/nccl_resources.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;

namespace {

const cluster_spec& dgx_h100() { return test::data().cluster("dgx-h100"); }

run_config layout(std::uint64_t gpus, std::uint64_t tp, std::uint64_t pp) {
  run_config r;
  r.gpus = gpus, r.tp = tp, r.pp = pp;
  return r;
}

}  // namespace

TEST_CASE("communication: a group's ranks placed in Megatron's order, tensor parallelism innermost", "[communication]") {
  // 64 GPUs, 8 a node, TP 8 / PP 4 / DP 2 (megatron/core/parallel_state.py, order tp-cp-ep-dp-pp): a tensor group
  // is one node's 8 GPUs; a data-parallel group's 2 ranks are 8 apart: on 2 nodes; a pipeline group's 4 ranks 16
  // apart: on 4 nodes.
  const run_config r = layout(64, 8, 4);
  CHECK(placement_of(comm_group::tensor, r, 8).ranks == 8);
  CHECK(placement_of(comm_group::tensor, r, 8).nodes == 1);
  CHECK(placement_of(comm_group::data, r, 8).ranks == 2);
  CHECK(placement_of(comm_group::data, r, 8).nodes == 2);
  CHECK(placement_of(comm_group::pipeline, r, 8).ranks == 4);
  CHECK(placement_of(comm_group::pipeline, r, 8).nodes == 4);
  // 16 GPUs with TP 2 / DP 8: a data-parallel group's ranks are 2 apart, 4 on each of 2 nodes.
  const run_config d = layout(16, 2, 1);
  CHECK(placement_of(comm_group::data, d, 8).ranks == 8);
  CHECK(placement_of(comm_group::data, d, 8).nodes == 2);
  // A pipeline send crosses nodes when its stages do: PP 4 of 8-GPU TP groups, one stage a node.
  CHECK(pair_placement(comm_group::pipeline, r, 8).ranks == 2);
  CHECK(pair_placement(comm_group::pipeline, r, 8).nodes == 2);
  // ...and stays inside a node when two stages share one (TP 2 x PP 4 on 8 GPUs).
  CHECK(pair_placement(comm_group::pipeline, layout(8, 2, 4), 8).nodes == 1);
  // One rank: no group.
  CHECK(placement_of(comm_group::expert, r, 8).ranks == 1);
}

TEST_CASE("communication: buckets: ceil(total / bucket) collectives of equal size, the last of each time unhidden", "[communication]") {
  step_comm c;
  // 100 MB in 25 MiB (26,214,400 B) buckets: ceil(3.81) = 4 buckets of 25 MB, twice a step (two micro-batches).
  add_buckets(c, "x", collective::all_reduce, comm_group::data, 100e6, 25.0 * (1 << 20), 2, comm_window::backward, true);
  REQUIRE(c.ops.size() == 1);
  CHECK(c.ops[0].bytes == Approx(25e6));
  CHECK(c.ops[0].count == 8);
  CHECK(c.ops[0].unhidden_count == 2);
  // No bucket size: one collective of the whole.
  add_buckets(c, "y", collective::all_gather, comm_group::data, 100e6, 0, 1, comm_window::none, false);
  CHECK(c.ops[1].bytes == Approx(100e6));
  CHECK(c.ops[1].count == 1);
  // Nothing to move: no op.
  add_buckets(c, "z", collective::all_gather, comm_group::data, 0, 0, 1, comm_window::none, false);
  CHECK(c.ops.size() == 2);
}

TEST_CASE("communication: the step waits U + max(0, C - U - W) of a window's collectives", "[communication]") {
  const cluster_spec& cl = dgx_h100();
  const run_config r = layout(8, 1, 1);
  const group_placement data8{8, 1};
  const double one = collective_seconds(cl, collective::all_reduce, 64e6, data8);  // one 64 MB all-reduce
  REQUIRE(one > 0);
  step_comm c;
  c.ops.push_back({"ar", collective::all_reduce, comm_group::data, 64e6, 10, comm_window::backward, 1});
  comm_windows w;
  // C = 10 one, U = 1 one. No compute beside it: all 10 exposed.
  comm_time t = overlap_communication(c, w, cl, r, 0);
  CHECK(t.seconds == Approx(10 * one));
  CHECK(t.exposed_seconds == Approx(10 * one));
  CHECK(t.hidden_seconds == Approx(0).margin(1e-15));
  // W = 4 one: 1 + (10 - 1 - 4) = 6 exposed, 4 hidden.
  w.seconds[static_cast<std::size_t>(comm_window::backward)] = 4 * one;
  t = overlap_communication(c, w, cl, r, 0);
  CHECK(t.exposed_seconds == Approx(6 * one));
  CHECK(t.hidden_seconds == Approx(4 * one));
  CHECK(t.exposed_by_group[static_cast<std::size_t>(comm_group::data)] == Approx(6 * one));
  // W beyond C: only the unhidden one.
  w.seconds[static_cast<std::size_t>(comm_window::backward)] = 100 * one;
  t = overlap_communication(c, w, cl, r, 0);
  CHECK(t.exposed_seconds == Approx(one));
  // With the GPU's SMs known, the 9 hidden slow the compute by NCCL's share of the 132 SMs.
  const double share = nccl_sm_fraction(cl, collective::all_reduce, data8, 132);
  t = overlap_communication(c, w, cl, r, 132);
  CHECK(t.slowdown_seconds == Approx(9 * one * share));
  // The same collective in no window: the step waits for all of it, whatever the compute.
  c.ops[0].window = comm_window::none;
  t = overlap_communication(c, w, cl, r, 132);
  CHECK(t.exposed_seconds == Approx(10 * one));
  CHECK(t.slowdown_seconds == Approx(0).margin(1e-15));
}

TEST_CASE("communication: the windows: forward, backward, the last micro-batch's backward, weight-gradient GEMMs", "[communication]") {
  // One GEMM, a third of its time in forward (its own forward_share), whatever the roofline makes of its seconds.
  step_ops ops;
  step_op gemm;
  gemm.name = "gemm", gemm.cls = op_class::gemm, gemm.gemm_shaped = true, gemm.flops = 3e12, gemm.forward_share = 1.0f / 3;
  gemm.m = gemm.n = gemm.k = 1e5;
  ops.ops.push_back(gemm);
  const roofline_rates rates(1e15, 1e12, test::data().calibration_for(test::data().gpu("h100")).timing("hf"), false);
  const double s = rates.seconds(gemm);
  const comm_windows w = windows_of(ops, rates, 4);
  CHECK(w.seconds[static_cast<std::size_t>(comm_window::forward)] == Approx(s / 3));
  CHECK(w.seconds[static_cast<std::size_t>(comm_window::backward)] == Approx(2 * s / 3));
  CHECK(w.seconds[static_cast<std::size_t>(comm_window::last_backward)] == Approx(2 * s / 3 / 4));
  CHECK(w.seconds[static_cast<std::size_t>(comm_window::weight_gradients)] == Approx(s / 3));  // half the backward's
}

TEST_CASE("communication: NCCL's memory: one communicator per group that communicates", "[communication]") {
  const cluster_spec& cl = dgx_h100();
  // TP 8 x DP 2 on 16 GPUs: the tensor group's all-reduces (8 ranks in a node: NVLS) and the data group's
  // reduce-scatter (2 ranks on 2 nodes).
  const run_config r = layout(16, 8, 1);
  step_comm c;
  c.ops.push_back({"tp", collective::all_reduce, comm_group::tensor, 1e6, 1, comm_window::none, 0});
  c.ops.push_back({"dp", collective::reduce_scatter, comm_group::data, 1e6, 1, comm_window::none, 0});
  const double expected = nccl_buffer_bytes(cl, {8, 1}, true) + nccl_buffer_bytes(cl, {2, 2}, false);
  CHECK(nccl_memory_bytes(c, cl, r) == Approx(expected));
  CHECK(uses_nvls(cl, collective::all_reduce, {8, 1}));
  CHECK_FALSE(uses_nvls(cl, collective::reduce_scatter, {2, 2}));
  // A group that runs nothing holds nothing (NCCL connects on first use).
  step_comm none;
  CHECK(nccl_memory_bytes(none, cl, r) == 0);
}

TEST_CASE("communication: context parallelism's groups in Megatron's order, after tensor parallelism", "[communication][cp]") {
  // 16 GPUs, 8 a node, TP 2 x CP 2 x DP 2 x PP 2 (order tp-cp-ep-dp-pp): a context group's 2 ranks are 2 apart (one
  // node); the gradients reduce over data x context parallelism, 4 ranks 2 apart (one node); a pipeline group's 2
  // ranks 8 apart (two nodes).
  run_config r = layout(16, 2, 2);
  r.cp = 2;
  CHECK(placement_of(comm_group::context, r, 8).ranks == 2);
  CHECK(placement_of(comm_group::context, r, 8).nodes == 1);
  CHECK(placement_of(comm_group::data, r, 8).ranks == 4);
  CHECK(placement_of(comm_group::data, r, 8).nodes == 1);
  CHECK(placement_of(comm_group::pipeline, r, 8).ranks == 2);
  CHECK(placement_of(comm_group::pipeline, r, 8).nodes == 2);
  // A ring over 2 nodes, 2 ranks on each (TP 4 x CP 4 on 16 GPUs): two of its hops cross between the nodes, and a
  // ring step waits for its slowest: a send between two nodes.
  run_config ring = layout(16, 4, 1);
  ring.cp = 4;
  CHECK(placement_of(comm_group::context, ring, 8).nodes == 2);
  CHECK(pair_placement(comm_group::context, ring, 8).ranks == 2);
  CHECK(pair_placement(comm_group::context, ring, 8).nodes == 2);
  // ...and inside one node (TP 2 x CP 4 on 8 GPUs).
  run_config one_node = layout(8, 2, 1);
  one_node.cp = 4;
  CHECK(pair_placement(comm_group::context, one_node, 8).nodes == 1);
}

TEST_CASE("communication: a collective beside its own block of compute waits max(0, t - W / blocks)", "[communication][cp]") {
  // Llama-2-7B's key and value block at cp 2, s 4096, b 1, bf16: 2048 x 8192 x 2 B = 33,554,432 B, sent to the next
  // GPU of a DGX H100: NCCL's point-to-point latency (ring LL base 6.6 us + one NVLink hop 0.6 us: NCCL 2.30.7
  // tuning.cc) plus the bytes at the ring's NVLink4 rate, 450 GB/s x 0.81 = 364.5 GB/s (data/clusters.json).
  const cluster_spec& cl = dgx_h100();
  run_config r = layout(2, 1, 1);
  r.cp = 2;
  const double bytes = 2048.0 * 8192 * 2;
  const double t = 7.2e-6 + bytes / 364.5e9;  // 99.26 us
  CHECK(collective_seconds(cl, collective::send_recv, bytes, {2, 1}) == Approx(t).epsilon(1e-9));
  // 64 sends (cp - 1 = 1 per layer and micro-batch: 32 layers, 2 micro-batches), each beside one of 128 blocks.
  step_comm c;
  comm_op ring{"ring", collective::send_recv, comm_group::context, bytes, 64, comm_window::attention_forward, 0};
  ring.blocks = 128;
  c.ops.push_back(ring);
  comm_windows w;
  // Blocks of 50 us: each send waits t - 50 us.
  w.seconds[static_cast<std::size_t>(comm_window::attention_forward)] = 128 * 50e-6;
  comm_time out = overlap_communication(c, w, cl, r, 0);
  CHECK(out.seconds == Approx(64 * t));
  CHECK(out.exposed_seconds == Approx(64 * (t - 50e-6)));
  CHECK(out.hidden_seconds == Approx(64 * 50e-6));
  CHECK(out.exposed_by_group[static_cast<std::size_t>(comm_group::context)] == Approx(64 * (t - 50e-6)));
  // Blocks of 200 us: every send hidden, though the window's total (25.6 ms) would hide the sum either way.
  w.seconds[static_cast<std::size_t>(comm_window::attention_forward)] = 128 * 200e-6;
  out = overlap_communication(c, w, cl, r, 132);
  CHECK(out.exposed_seconds == Approx(0).margin(1e-15));
  CHECK(out.slowdown_seconds == Approx(64 * t * nccl_sm_fraction(cl, collective::send_recv, {2, 1}, 132)));
  // Per block, not pooled: the 50 us blocks again, with one send of 4 blocks' time and one of none: max(0, .) each.
  c.ops[0].count = 1, c.ops[0].blocks = 2;
  w.seconds[static_cast<std::size_t>(comm_window::attention_forward)] = 2 * (t / 4);
  CHECK(overlap_communication(c, w, cl, r, 0).exposed_seconds == Approx(t - t / 4));
  // A collective that shares the window does not count the blocked one's compute as taken, nor the reverse.
  c.ops.push_back({"pooled", collective::send_recv, comm_group::context, bytes, 1, comm_window::attention_forward, 0});
  CHECK(overlap_communication(c, w, cl, r, 0).exposed_seconds == Approx((t - t / 4) + (t - 2 * (t / 4))));
}

TEST_CASE("communication: the attention core's forward passes and backward passes as windows", "[communication][cp]") {
  // Under full recomputation flash attention runs 2 forwards a backward; with its backward 3x a forward's FLOPs its
  // first forward is 1 / (2 + 3) of its work (the op's forward_share), its forwards 2/5 and its backward 3/5.
  step_ops ops;
  step_op attn;
  attn.name = "attention.flash", attn.cls = op_class::attention, attn.flops = 5e12, attn.bytes = 1e9,
  attn.forward_share = 0.2f;
  ops.ops.push_back(attn);
  ops.attention_forwards_per_backward = 2;
  const roofline_rates rates(1e15, 1e12, test::data().calibration_for(test::data().gpu("h100")).timing("hf"), false);
  const double s = rates.seconds(attn);
  const comm_windows w = windows_of(ops, rates, 1);
  CHECK(w.seconds[static_cast<std::size_t>(comm_window::attention_forward)] == Approx(2 * 0.2 * s));
  CHECK(w.seconds[static_cast<std::size_t>(comm_window::attention_backward)] == Approx(0.6 * s));
}

TEST_CASE("communication: NCCL's memory: a group that only sends holds a pair's point-to-point buffers", "[communication][cp]") {
  const cluster_spec& cl = dgx_h100();
  run_config r = layout(8, 2, 1);
  r.cp = 4;
  step_comm c;
  c.ops.push_back({"ring", collective::send_recv, comm_group::context, 1e6, 1, comm_window::attention_forward, 0});
  CHECK(nccl_memory_bytes(c, cl, r) == Approx(nccl_p2p_buffer_bytes(cl, {2, 1})));
}
