#pragma once
// A measured NCCL sweep (bus bandwidth at each message size) as a function of the message size.
#include <vector>

#include "planner/system/cluster.hpp"

namespace trainplan {

// The bus bandwidth (GB/s) at `bytes`, interpolated linearly in log(size)-log(busbw) between the two measured
// sizes around it: nccl-tests sweeps step in powers of two, and busbw rises as a power of the size where latency
// dominates (busbw ~ size: one time for every small message) and flattens at the link's rate, both straight in
// log-log. Above the largest size the largest size's busbw holds (the plateau); below the smallest the smallest
// size's time holds (busbw in proportion to the size: latency-bound). Points at 0 GB/s (rounded small messages)
// carry no rate and are skipped. A measured size that ran faster than a smaller one (busbw more than the smaller
// size's x the size ratio: noise at latency-bound sizes) is given the smaller one's time, so that the time never
// falls as the size grows. Throws std::invalid_argument without a point above 0.
double interpolated_bus_gbytes_per_s(const std::vector<measured_point>& points, double bytes);

}  // namespace trainplan
