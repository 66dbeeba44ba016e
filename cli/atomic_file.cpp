#include "cli/atomic_file.hpp"

#include <fmt/format.h>

#include <fstream>

#include "planner/input_error.hpp"

namespace trainplan::cli {

void write_file_atomically(const std::filesystem::path& path, const std::string& content) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  const std::filesystem::path partial = path.string() + ".partial";
  {
    std::ofstream out(partial, std::ios::binary);
    if (!out || !(out << content) || !out.flush()) {
      std::filesystem::remove(partial, ec);
      throw input_error(fmt::format("cannot write {}", path.string()));
    }
  }
  std::filesystem::rename(partial, path, ec);
  if (ec) {
    std::filesystem::remove(partial, ec);
    throw input_error(fmt::format("cannot write {}: {}", path.string(), ec.message()));
  }
}

}  // namespace trainplan::cli
