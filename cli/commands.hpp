#pragma once
// Each subcommand registers its options on the app and returns the action to run once parsed.
// An action returns the process exit code: 0 success/fits, 1 does not fit, 2 bad input.
#include <functional>

#include <CLI/CLI.hpp>

namespace trainplan::cli {

using command_action = std::function<int()>;

// The fit check lives on the top-level app: `plan --params 7B --seq 4096 --gpu h100`.
command_action register_fit_check(CLI::App& app);
// `plan gpus`, `plan models`: what the data knows.
void register_list_commands(CLI::App& app, command_action& chosen);
// `plan clusters`: the cluster presets.
void register_clusters_command(CLI::App& app, command_action& chosen);
// `plan validate`: real training steps against the prediction.
void register_validate_command(CLI::App& app, command_action& chosen);
// `plan sweep`: the cross product of option values, as CSV or JSON lines.
void register_sweep_command(CLI::App& app, command_action& chosen);
// `plan bench`: speed figures.
void register_bench_command(CLI::App& app, command_action& chosen);
// `plan search` and `plan max`: the best configurations, and the inverse questions.
void register_search_command(CLI::App& app, command_action& chosen);
void register_max_command(CLI::App& app, command_action& chosen);
// `plan plot`: charts through gnuplot.
void register_plot_command(CLI::App& app, command_action& chosen);
// `plan check`: predict the runs a collector report measured, beside the measurements.
void register_check_command(CLI::App& app, command_action& chosen);
// `plan calibrate`: fit calibration constants from GPU validation reports.
void register_calibrate_command(CLI::App& app, command_action& chosen);

}  // namespace trainplan::cli
