#pragma once
// A cluster's effective bus bandwidths fitted to the collectives a real multi-GPU run timed (collect_hf.py
// --parallel under torchrun with --profile: "collectives", the NCCL kernels of one profiled step), for
// `plan calibrate --cluster-from`.
//
// The fit, for each collective kind (all_reduce, all_gather, ...) and scope (inside one node, across nodes):
//   ratio_i = measured_i / predicted_i  for each measured collective i (one kind, size and communicator of a run:
//             its median kernel time per call) against collective_seconds of the preset without fitted factors
//             (planner/time/collectives.hpp)
//   factor  = 1 / median_i(ratio_i)     the scale of the model's effective bus bandwidth
// so that the fitted model predicts the median collective exactly, and each other within its spread around the
// median. The factor scales latency and bandwidth alike (the time over the factor): one number per kind and
// scope, which the few sizes a training step runs cannot split into the two. Kinds and scopes nothing measured
// keep the model's own figures.
#include <cstdint>
#include <string>
#include <vector>

#include "planner/measure/measured_runs.hpp"
#include "planner/system/cluster.hpp"

namespace trainplan {

struct cluster_fit_sample {
  std::string run_id;
  collective coll = collective::all_reduce;
  link_scope scope = link_scope::intra_node;
  double message_bytes = 0;
  std::uint64_t ranks = 0, nodes = 0, calls = 0;
  double measured_seconds = 0, predicted_seconds = 0;  // predicted: the model without fitted factors
  double ratio() const { return measured_seconds / predicted_seconds; }
};

struct cluster_fit_row {
  collective coll = collective::all_reduce;
  link_scope scope = link_scope::intra_node;
  std::uint64_t samples = 0;
  double median_ratio = 1;     // measured / predicted
  double factor = 1;           // 1 / median_ratio: fitted_efficiency's factor
  double median_error_before_pct = 0, max_error_before_pct = 0;  // |predicted / measured - 1| without the factor
  double median_error_after_pct = 0, max_error_after_pct = 0;    // and with it
};

struct cluster_fit {
  std::vector<cluster_fit_sample> samples;  // in file and line order
  std::vector<cluster_fit_row> rows;        // in collective, then scope order
  std::uint64_t left_out = 0;               // collectives of the reports the planner does not time, or without sizes
};

// Fits `cluster` (its own fitted factors set aside) to every measured collective of `files`. Throws input_error when
// none has a collective the planner times, or when one's communicator does not fit the preset (more ranks a node
// than it has GPUs: measured on another cluster).
cluster_fit fit_cluster(const cluster_spec& cluster, const std::vector<measured_file>& files);

}  // namespace trainplan
