#pragma once
// The collective model (planner/time/collectives.hpp) against every measured NCCL run in data/clusters.json: one
// row per measured size, with what the run's role is for the model, so that held-out errors are told apart from
// checks the model cannot fail.
#include <cstdint>
#include <string>
#include <vector>

#include "planner/system/cluster.hpp"

namespace trainplan {

enum class check_role {
  held_out,         // nothing of this run went into the model
  leave_one_out,    // a point of the intra-node sweep the model interpolates, predicted from the others
  constant_source,  // the run is a source of a link or fabric efficiency (source_of in the data)
  forced,           // an algorithm set through the environment: the model predicts NCCL's own choice
  modified_driver,  // not a stock configuration
};
std::string_view check_role_name(check_role r);

struct collective_check_row {
  std::string cluster;
  collective coll = collective::all_reduce;
  std::uint64_t gpus = 0, nodes = 0;
  std::string algorithm;      // the run's ("default", "ring", ...)
  double message_bytes = 0;
  double measured_seconds = 0;
  double predicted_seconds = 0;
  double error = 0;           // predicted / measured time - 1
  check_role role = check_role::held_out;
  std::string source;
};

// Every measured point of the presets' own series (a baseboard's series are checked under the preset that holds
// them), in file order. Points with neither a time nor a busbw above 0 are left out.
std::vector<collective_check_row> check_collectives(const std::vector<cluster_spec>& clusters);

}  // namespace trainplan
