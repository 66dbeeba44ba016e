// Drawing a chart with gnuplot (gnuplot.hpp): the data and script written to a private temporary folder, gnuplot
// run there, and the picture written through the one output path (output_file.hpp).
#include "cli/gnuplot.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "cli/output_file.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan::cli {
namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string gnuplot_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

}  // namespace

void check_chart_output(const std::string& path) {
  const std::filesystem::path out(path);
  if (out.extension() != ".svg" && out.extension() != ".png")
    throw input_error(fmt::format("-o {}: the file must end in .svg or .png", path));
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0)
    throw input_error("gnuplot is not installed: apt-get install gnuplot-nox (scripts/build.sh does)");
}

void render_gnuplot(const gnuplot_job& job, output_file& output) {
  check_chart_output(job.output);
  const std::filesystem::path out(job.output);
  const std::string terminal =
      out.extension() == ".svg" ? "set terminal svg size 960,600 dynamic enhanced background rgb 'white' font 'Helvetica,13'"
                                : "set terminal pngcairo size 960,600 enhanced background rgb 'white' font 'Helvetica,11'";

  const std::filesystem::path dir = std::filesystem::temp_directory_path() / fmt::format("trainplan-plot-{}", getpid());
  std::error_code dir_error;
  std::filesystem::create_directories(dir, dir_error);
  if (dir_error) throw input_error(fmt::format("cannot make a folder for gnuplot in {}: {}", dir.parent_path().string(), dir_error.message()));
  for (const auto& [name, content] : job.data_files) std::ofstream(dir / name) << content;
  // gnuplot draws into the private folder; the picture then goes out through the one output path.
  const std::filesystem::path partial = dir / ("picture" + out.extension().string());
  std::ofstream(dir / "plot.gp") << terminal << "\nset output " << gnuplot_quote(partial.string()) << "\n"
                                 << "cd " << gnuplot_quote(dir.string()) << "\n"
                                 << job.script << "\nunset output\n";
  const std::string cmd = fmt::format("gnuplot {} 2>{}", shell_quote((dir / "plot.gp").string()),
                                      shell_quote((dir / "stderr.txt").string()));
  const int status = std::system(cmd.c_str());
  std::ifstream err_in(dir / "stderr.txt");
  std::string first_error;
  for (std::string line; std::getline(err_in, line);)
    if (!line.empty() && line.find_first_not_of(" ^") != std::string::npos) {
      if (first_error.empty() || line.find("line") != std::string::npos) first_error = line;
    }
  std::error_code ec;
  if (status != 0 || !std::filesystem::exists(partial) || std::filesystem::file_size(partial, ec) == 0) {
    std::filesystem::remove_all(dir, ec);
    throw input_error(fmt::format("gnuplot failed{}", first_error.empty() ? "" : ": " + first_error));
  }
  std::ifstream picture_in(partial, std::ios::binary);
  std::ostringstream picture;
  picture << picture_in.rdbuf();
  std::filesystem::remove_all(dir, ec);
  output.write(picture.str());
  output.commit();
}

}  // namespace trainplan::cli
