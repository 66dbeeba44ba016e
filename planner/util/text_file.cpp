// Reading a file a user names (text_file.hpp): a regular file only, at most 64 MiB, every failure an
// input_error naming the file.
#include "planner/util/text_file.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <mutex>
#include <sys/stat.h>
#include <utility>
#include <vector>

#include "planner/util/input_error.hpp"

namespace trainplan {

namespace {
std::mutex inputs_mutex;
std::vector<std::pair<dev_t, ino_t>> inputs;   // every file read as an input, by identity
std::vector<std::pair<dev_t, ino_t>> updated;  // files the command updates in place (it may have read them
                                               // as inputs too: calibrate with --data-dir loads its calibration)
}  // namespace

bool is_input_file(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.string().c_str(), &st) != 0) return false;
  const std::pair<dev_t, ino_t> id{st.st_dev, st.st_ino};
  const std::lock_guard<std::mutex> lock(inputs_mutex);
  return std::find(inputs.begin(), inputs.end(), id) != inputs.end() &&
         std::find(updated.begin(), updated.end(), id) == updated.end();
}

std::string read_text_file(const std::filesystem::path& path, file_use use) {
  const std::string name = path.string();
  struct stat st {};
  if (::stat(name.c_str(), &st) != 0) throw input_error(fmt::format("{}: cannot read the file: {}", name, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw input_error(fmt::format("{}: is a folder, not a file", name));
  if (!S_ISREG(st.st_mode)) throw input_error(fmt::format("{}: not a regular file (a device, FIFO or socket)", name));
  if (static_cast<std::uintmax_t>(st.st_size) > max_input_file_bytes)
    throw input_error(fmt::format("{}: larger than {} MiB", name, max_input_file_bytes >> 20));
  {
    const std::lock_guard<std::mutex> lock(inputs_mutex);
    (use == file_use::input ? inputs : updated).emplace_back(st.st_dev, st.st_ino);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw input_error(fmt::format("{}: cannot read the file", name));
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) throw input_error(fmt::format("{}: reading failed", name));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

}  // namespace trainplan
