#pragma once
// A test's scratch folder under the system's temporary directory: named for the test and the process,
// emptied when asked for, and removed when the process ends (ctest runs each test case in a process of its
// own), so that the suite leaves nothing behind in /tmp; it once left some sixty folders a run.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace trainplan::test {

inline std::filesystem::path scratch_dir(const std::string& name) {
  struct removed_at_exit {
    std::vector<std::filesystem::path> dirs;
    ~removed_at_exit() {
      for (const std::filesystem::path& d : dirs) {
        std::error_code ec;  // a folder a test made read-only may stay: nothing to fail on at exit
        std::filesystem::remove_all(d, ec);
      }
    }
  };
  static removed_at_exit owned;
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  owned.dirs.push_back(dir);
  return dir;
}

}  // namespace trainplan::test
