#pragma once
// Renders a chart with gnuplot (Debian's gnuplot-nox): writes the data and the script to a temporary
// folder and runs gnuplot on them. The output's extension picks the terminal: .svg or .png.
#include <string>
#include <vector>

namespace trainplan::cli {

struct gnuplot_job {
  std::string output;                       // path ending in .svg or .png
  std::vector<std::pair<std::string, std::string>> data_files;  // name -> content, referenced by name
  std::string script;                       // everything after the terminal and output lines
};

class output_file;

// Before any point is computed: throws input_error when the extension of `path` is not .svg or .png, or gnuplot
// is missing.
void check_chart_output(const std::string& path);

// Draws the chart into `out` (opened on job.output before the work, so that a bad path is refused first) and
// commits it. Throws input_error when the extension is unknown, gnuplot is missing, or gnuplot fails (its first
// line of complaint is in the message).
void render_gnuplot(const gnuplot_job& job, output_file& out);

}  // namespace trainplan::cli
