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

// Throws input_error when gnuplot is missing, the extension is unknown, or gnuplot fails (its first line
// of complaint is in the message).
void render_gnuplot(const gnuplot_job& job);

}  // namespace trainplan::cli
