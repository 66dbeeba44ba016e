// A step's collectives overlapped with its compute (communication.hpp).
#include "planner/time/communication.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "planner/time/nccl_resources.hpp"

namespace trainplan {

std::string_view comm_group_name(comm_group g) {
  switch (g) {
    case comm_group::data: return "data-parallel";
    case comm_group::tensor: return "tensor-parallel";
    case comm_group::pipeline: return "pipeline";
    case comm_group::expert: return "expert-parallel";
    case comm_group::context: return "context-parallel";
  }
  return "?";
}

group_placement placement_of(comm_group g, const run_config& run, std::uint64_t gpus_per_node) {
  const std::uint64_t tp = run.tp, cp = run.cp, dp = run.data_parallel(), pp = run.pp;
  const std::uint64_t gpn = std::max<std::uint64_t>(gpus_per_node, 1);
  // A group of `ranks` whose consecutive members are `stride` ranks apart: a node holds gpn / stride of them (at
  // least one), and the group's ranks spread evenly over the nodes they need.
  auto spread = [gpn](std::uint64_t ranks, std::uint64_t stride) {
    if (ranks <= 1) return group_placement{1, 1};
    std::uint64_t per_node = std::clamp<std::uint64_t>(gpn / std::max<std::uint64_t>(stride, 1), 1, ranks);
    per_node = std::gcd(per_node, ranks);
    return group_placement{ranks, ranks / per_node};
  };
  switch (g) {
    case comm_group::tensor: return spread(tp, 1);
    case comm_group::context: return spread(cp, tp);
    case comm_group::expert: return spread(run.ep, tp);  // experts are sharded within the data-parallel ranks
    case comm_group::data: return spread(dp * cp, tp);   // consecutive: context then data parallelism
    case comm_group::pipeline: return spread(pp, tp * cp * dp);
  }
  return {};
}

group_placement pair_placement(comm_group g, const run_config& run, std::uint64_t gpus_per_node) {
  const group_placement group = placement_of(g, run, gpus_per_node);
  if (group.ranks <= 1) return {1, 1};
  if (g == comm_group::context) return {2, group.nodes > 1 ? 2u : 1u};  // the ring's slowest hop
  return {2, group.nodes > 1 && group.ranks / group.nodes == 1 ? 2u : 1u};
}

void add_buckets(step_comm& comm, std::string_view name, collective kind, comm_group group, double total_bytes,
                 double bucket_bytes, double times, comm_window window, bool last_unhidden) {
  if (total_bytes <= 0 || times <= 0) return;
  const double buckets = bucket_bytes > 0 ? std::ceil(total_bytes / bucket_bytes) : 1;
  comm.ops.push_back({name, kind, group, total_bytes / buckets, buckets * times, window, last_unhidden ? times : 0});
}

comm_windows windows_of(const step_ops& ops, const roofline_rates& rates, std::uint64_t grad_accum) {
  comm_windows w;
  double backward_gemms = 0;
  for (const step_op& op : ops.ops)
    if (op.gemm_shaped && op.cls != op_class::optimizer) backward_gemms += rates.seconds(op) * (1 - op.forward_share);
  const phase_seconds d = device_seconds_by_phase(ops, rates);
  w.seconds[static_cast<std::size_t>(comm_window::forward)] = d.forward;
  w.seconds[static_cast<std::size_t>(comm_window::backward)] = d.backward;
  w.seconds[static_cast<std::size_t>(comm_window::last_backward)] = d.backward / static_cast<double>(std::max<std::uint64_t>(grad_accum, 1));
  w.seconds[static_cast<std::size_t>(comm_window::weight_gradients)] = backward_gemms / 2;
  double attention = 0, attention_first_forward = 0;
  for (const step_op& op : ops.ops)
    if (op.cls == op_class::attention) {
      const double seconds = rates.seconds(op);
      attention += seconds;
      attention_first_forward += seconds * op.forward_share;
    }
  const double attention_forwards = std::min(attention, attention_first_forward * ops.attention_forwards_per_backward);
  w.seconds[static_cast<std::size_t>(comm_window::attention_forward)] = attention_forwards;
  w.seconds[static_cast<std::size_t>(comm_window::attention_backward)] = attention - attention_forwards;
  return w;
}

namespace {

group_placement placement_for(const comm_op& op, const run_config& run, const cluster_spec& cluster) {
  return op.kind == collective::send_recv ? pair_placement(op.group, run, cluster.gpus_per_node)
                                          : placement_of(op.group, run, cluster.gpus_per_node);
}

}  // namespace

comm_time overlap_communication(const step_comm& comm, const comm_windows& windows, const cluster_spec& cluster,
                                const run_config& run, std::uint32_t sm_count) {
  comm_time t;
  std::array<double, comm_window_count> total{}, unhidden{}, sm_weighted{};
  std::array<std::array<double, comm_group_count>, comm_window_count> by_group{};
  for (const comm_op& op : comm.ops) {
    if (op.count <= 0 || op.bytes <= 0) continue;
    const group_placement where = placement_for(op, run, cluster);
    const double one = collective_seconds(cluster, op.kind, op.bytes, where);
    const auto w = static_cast<std::size_t>(op.window), gi = static_cast<std::size_t>(op.group);
    t.seconds_by_group[gi] += one * op.count;
    t.seconds += one * op.count;
    if (op.blocks > 0 && op.window != comm_window::none) {
      // Each collective beside one block of the window's compute: the step waits for what it takes beyond it.
      const double exposed = op.count * std::max(0.0, one - windows.seconds[w] / op.blocks);
      const double hidden = one * op.count - exposed;
      t.exposed_seconds += exposed;
      t.hidden_seconds += hidden;
      t.exposed_by_group[gi] += exposed;
      if (sm_count > 0 && where.ranks > 1) t.slowdown_seconds += hidden * nccl_sm_fraction(cluster, op.kind, where, sm_count);
      continue;
    }
    total[w] += one * op.count;
    unhidden[w] += one * std::min(op.unhidden_count, op.count);
    if (sm_count > 0 && where.ranks > 1) sm_weighted[w] += one * op.count * nccl_sm_fraction(cluster, op.kind, where, sm_count);
    by_group[w][gi] += one * op.count;
  }
  for (std::size_t w = 0; w < comm_window_count; ++w) {
    if (total[w] <= 0) continue;
    const bool waits = static_cast<comm_window>(w) == comm_window::none;
    const double exposed = waits ? total[w] : unhidden[w] + std::max(0.0, total[w] - unhidden[w] - windows.seconds[w]);
    const double hidden = total[w] - exposed;
    t.exposed_seconds += exposed;
    t.hidden_seconds += hidden;
    // The hidden time slows the compute beside it by the SMs its kernels hold, weighted by their time.
    t.slowdown_seconds += hidden * sm_weighted[w] / total[w];
    // The exposed share of a window goes to its groups in proportion to their time in it.
    for (std::size_t g = 0; g < comm_group_count; ++g) t.exposed_by_group[g] += exposed * by_group[w][g] / total[w];
  }
  return t;
}

double nccl_memory_bytes(const step_comm& comm, const cluster_spec& cluster, const run_config& run) {
  // One communicator per process group: its connections are made for the algorithms its collectives use.
  std::array<bool, comm_group_count> used{}, nvls{}, p2p{}, collectives{};
  for (const comm_op& op : comm.ops) {
    if (op.count <= 0 || op.bytes <= 0) continue;
    const auto g = static_cast<std::size_t>(op.group);
    const group_placement where = placement_of(op.group, run, cluster.gpus_per_node);
    if (where.ranks <= 1) continue;
    used[g] = true;
    if (uses_nvls(cluster, op.kind, where)) nvls[g] = true;
    if (op.kind == collective::send_recv || op.kind == collective::all_to_all) p2p[g] = true;
    if (op.kind != collective::send_recv) collectives[g] = true;
  }
  double bytes = 0;
  for (std::size_t g = 0; g < comm_group_count; ++g) {
    if (!used[g]) continue;
    const group_placement where = placement_of(static_cast<comm_group>(g), run, cluster.gpus_per_node);
    if (!collectives[g]) {  // a group that only sends and receives: the pipeline, a context-parallel ring
      bytes += nccl_p2p_buffer_bytes(cluster, pair_placement(static_cast<comm_group>(g), run, cluster.gpus_per_node));
      continue;
    }
    bytes += nccl_buffer_bytes(cluster, where, nvls[g]);
    if (p2p[g]) bytes += nccl_p2p_buffer_bytes(cluster, where);
  }
  return bytes;
}

}  // namespace trainplan
