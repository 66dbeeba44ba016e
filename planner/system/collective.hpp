#pragma once
// The NCCL collectives the planner times, and the names data/clusters.json and reports give them.
#include <cstdint>
#include <string_view>

namespace trainplan {

// The byte count that goes with each is nccl-tests' size column (doc/PERFORMANCE.md in NVIDIA/nccl-tests):
// all_reduce: the buffer each rank holds; all_gather: the whole gathered output; reduce_scatter: the whole
// input that is scattered; all_to_all: one rank's send buffer; send_recv: the message.
enum class collective { all_reduce, all_gather, reduce_scatter, all_to_all, send_recv };

std::string_view collective_name(collective c);  // "all_reduce"
// Throws input_error naming `where` ("clusters.json: clusters[0].series[2]") and the known names.
collective parse_collective(std::string_view text, std::string_view where);

// nccl-tests' bus-bandwidth factor: the bytes that cross each rank's link per byte of the message in an ideal
// point-to-point algorithm, so that busbw = algbw x factor is comparable with a link's speed whatever the rank
// count (NVIDIA/nccl-tests doc/PERFORMANCE.md; src/all_reduce.cu lines 59-64: 2(n-1)/n; all_gather.cu and
// reduce_scatter.cu: (n-1)/n; alltoall.cu lines 48-53: (n-1)/n; send/recv moves the message once: 1).
double bus_factor(collective c, std::uint64_t ranks);

}  // namespace trainplan
