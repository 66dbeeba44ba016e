#pragma once
// `plan bench --planner`'s last figure: how far the estimate (`plan sweep --estimate`: tensors, context, workspaces
// and the calibrated slack, without the allocator replay) lands from the replay's device peak, on the committed
// collector reports (data/measurements, tests/data/measurements) that one GPU measured.
#include <filesystem>
#include <vector>

namespace trainplan::cli {

// The reports' folders, looked for in the working directory and above the binary (build/plan, by /proc/self/exe);
// empty when neither holds them (an installed binary).
std::vector<std::filesystem::path> committed_measurement_folders();

// Prints one line: the runs compared, the estimate's median and largest error against the replay's peak, and the
// run of the largest. Nothing to compare: a line that says so.
void print_estimate_error(const std::vector<std::filesystem::path>& folders);

}  // namespace trainplan::cli
