#pragma once
// The collectives of one training step on one GPU, as its stack schedules them (each profile lists its own:
// planner/profiles/), and how much of their time the step waits for: what runs beside compute it can hide behind,
// what the step must wait for, and how much NCCL's kernels slow the compute they share the SMs with.
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "planner/run/run_config.hpp"
#include "planner/system/cluster.hpp"
#include "planner/system/collective.hpp"
#include "planner/time/collectives.hpp"
#include "planner/time/roofline.hpp"
#include "planner/time/step_ops.hpp"

namespace trainplan {

// Which of the run's process groups a collective runs on.
enum class comm_group : std::uint8_t { data, tensor, pipeline, expert, context };
inline constexpr std::size_t comm_group_count = 5;
std::string_view comm_group_name(comm_group g);  // "data-parallel"

// What compute a collective can run beside. Collectives in one window share it: what they take beyond it is
// exposed.
enum class comm_window : std::uint8_t {
  none,                   // nothing: the step waits (a gather after the optimizer, a tensor-parallel all-reduce)
  forward,                // the forward passes (FSDP's prefetched all-gathers)
  backward,               // the backward passes (FSDP's all-gathers and reduce-scatters)
  last_backward,          // the last micro-batch's backward (DDP's buckets, Megatron's overlapped gradient reduce)
  weight_gradients,       // the backward's weight-gradient GEMMs (Megatron's asynchronous tensor-parallel backward)
  attention_forward,      // the attention core's forward passes, recomputation included (context parallelism's ring)
  attention_backward,     // the attention core's backward passes
};
inline constexpr std::size_t comm_window_count = 7;

struct comm_op {
  std::string_view name;   // "data.all_reduce (DDP buckets)"
  collective kind = collective::all_reduce;
  comm_group group = comm_group::data;
  double bytes = 0;        // one collective's size, as nccl-tests counts it (planner/system/collective.hpp)
  double count = 0;        // collectives of that size per step
  comm_window window = comm_window::none;
  // Of `count`, how many cannot overlap whatever the window: the first gather of a forward, the last bucket of
  // a backward (issued when the compute it could hide behind has ended).
  double unhidden_count = 0;
  // 0: the collective shares its window's compute with the window's other collectives. Above 0: the window's compute
  // runs as this many equal blocks, and each of the `count` collectives runs beside one block of its own, the step
  // waiting for what it takes beyond that block (a ring step of context parallelism beside the attention of the
  // block in hand; a pipeline send beside the next model chunk's compute). Such a collective leaves the window's
  // compute to the others.
  double blocks = 0;
};

struct step_comm {
  std::vector<comm_op> ops;
};

// Adds `total_bytes` reduced or gathered in buckets of at most `bucket_bytes`, `times` a step (once per
// synchronising micro-batch); with `last_unhidden`, each time's last bucket is issued when the compute it could
// hide behind has ended.
void add_buckets(step_comm& comm, std::string_view name, collective kind, comm_group group, double total_bytes,
                 double bucket_bytes, double times, comm_window window, bool last_unhidden);

// Where a process group's ranks sit on the cluster: Megatron's order of ranks (tensor parallelism innermost,
// then context, expert within data, data, and pipeline outermost: megatron/core/parallel_state.py,
// RankGenerator with order "tp-cp-ep-dp-pp"), filled node by node. The data-parallel group is Megatron's "with
// context parallel" one (dp x cp ranks), over which gradients reduce.
group_placement placement_of(comm_group g, const run_config& run, std::uint64_t gpus_per_node);
// A send/recv's two ranks: neighbours in the group, on one node or two. A context-parallel ring's step moves a
// block between every pair of neighbours at once and waits for the slowest: between two nodes where the ring spans
// several.
group_placement pair_placement(comm_group g, const run_config& run, std::uint64_t gpus_per_node);

// The compute each window holds, in seconds of one GPU's step.
struct comm_windows {
  std::array<double, comm_window_count> seconds{};
};
// From the step's ops (every micro-batch's): the forward passes' and backward passes' device seconds, the last
// micro-batch's backward (1 / grad_accum of them), the weight-gradient GEMMs (half of the backward's GEMM time:
// of a linear's two backward GEMMs, one makes the input's gradient, the other the weight's), and the attention
// core's forward passes (its first forward's seconds x step_ops::attention_forwards_per_backward) and the rest of
// its seconds, its backward passes.
comm_windows windows_of(const step_ops& ops, const roofline_rates& rates, std::uint64_t grad_accum);

struct comm_time {
  double seconds = 0;          // every collective, end to end
  double exposed_seconds = 0;  // what the step waits for
  double hidden_seconds = 0;   // what runs beside compute
  double slowdown_seconds = 0; // the compute's slowdown while hidden collectives occupy SMs
  std::array<double, comm_group_count> exposed_by_group{};
  std::array<double, comm_group_count> seconds_by_group{};
};

// Times every op on `cluster` and overlaps it with its window: a window's collectives take C seconds, of which
// U cannot overlap; with W seconds of compute beside them the step waits U + max(0, C - U - W); a collective
// with blocks (comm_op::blocks) of t seconds waits max(0, t - W / blocks) each. The hidden part
// slows the compute it runs beside by the share of the GPU's `sm_count` SMs NCCL's kernels hold
// (nccl_sm_fraction; none when sm_count is 0, not known).
comm_time overlap_communication(const step_comm& comm, const comm_windows& windows, const cluster_spec& cluster,
                                const run_config& run, std::uint32_t sm_count);

// The device memory NCCL holds on each rank for the communicators the step's collectives run on, outside
// PyTorch's allocator: each process group's connection buffers (nccl_buffer_bytes, NVLS's where uses_nvls), and the
// point-to-point buffers of a group that sends and receives or exchanges all-to-all (nccl_p2p_buffer_bytes); a
// group that only sends and receives (pipeline, context-parallel ring) holds a neighbour pair's point-to-point
// buffers alone.
double nccl_memory_bytes(const step_comm& comm, const cluster_spec& cluster, const run_config& run);

}  // namespace trainplan
