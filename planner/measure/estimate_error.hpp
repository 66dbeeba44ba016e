#pragma once
// How far the estimate (`plan sweep --estimate`: tensors, context, workspaces and the calibrated slack, without the
// allocator replay) lands from the replay's device peak, the fit check's, on collector reports that one GPU
// measured (`plan bench --planner` prints it for the committed ones).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "planner/io/catalog.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/run/run_config.hpp"

namespace trainplan {

// One committed run: its peak as the estimate and as the replay (the fit check's) predict it.
struct estimate_row {
  std::string id;   // the report's GPU and the run's id
  std::string gpu;  // its entry in data/gpus.json
  model_spec model;
  run_config run;
  std::uint64_t estimate_bytes = 0, replay_bytes = 0;
  double error_pct() const { return 100.0 * (static_cast<double>(estimate_bytes) / static_cast<double>(replay_bytes) - 1); }
};
struct estimate_rows {
  std::vector<estimate_row> rows;
  std::size_t files = 0;  // collector reports read
};
// Every run measured on one GPU, in memory, that the planner predicts with the allocator replay.
estimate_rows estimate_against_replay(const catalog& data, const std::vector<std::filesystem::path>& folders);

}  // namespace trainplan
