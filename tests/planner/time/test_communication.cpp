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
