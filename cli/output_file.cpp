#include "cli/output_file.hpp"

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "planner/input_error.hpp"

namespace trainplan::cli {
namespace {

// Temporary files open now, for the signal handler. Fixed slots of fixed-size names, so the handler only
// reads plain memory and calls unlink(), which is async-signal-safe (signal-safety(7)).
constexpr std::size_t max_temp_files = 16;
constexpr std::size_t max_temp_path = 4096;
struct temp_slot {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 holds a path the handler may remove
  char path[max_temp_path] = {};
};
std::array<temp_slot, max_temp_files> temp_slots;

int register_temp(const std::string& path) {
  if (path.size() >= max_temp_path) return -1;
  for (std::size_t i = 0; i < temp_slots.size(); ++i) {
    int expected = 0;
    if (!temp_slots[i].state.compare_exchange_strong(expected, 1)) continue;
    std::memcpy(temp_slots[i].path, path.c_str(), path.size() + 1);
    temp_slots[i].state.store(2);
    return static_cast<int>(i);
  }
  return -1;
}

void unregister_temp(const std::string& path) {
  for (temp_slot& s : temp_slots)
    if (s.state.load() == 2 && path == s.path) s.state.store(0);
}

extern "C" void remove_temps_and_exit(int signal_number) {
  for (temp_slot& s : temp_slots)
    if (s.state.load() == 2) unlink(s.path);
  _exit(128 + signal_number);  // 130 for SIGINT, 143 for SIGTERM, as shells report them
}

}  // namespace

void install_output_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = remove_temps_and_exit;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

output_file::output_file(std::string path) : path_(std::move(path)) {
  if (path_.empty()) throw input_error("an output path is empty");
  if (path_ == "-") {
    stream_ = stdout;
    return;
  }
  struct stat st {};
  const bool exists = ::stat(path_.c_str(), &st) == 0;  // follows symbolic links
  if (exists && S_ISDIR(st.st_mode)) throw input_error(fmt::format("cannot write {}: it is a folder", path_));
  if (exists && !S_ISREG(st.st_mode)) {
    // A device, FIFO, socket or terminal: write into it, never replace it.
    stream_ = std::fopen(path_.c_str(), "wb");
    if (!stream_) throw input_error(fmt::format("cannot write {}: {}", path_, std::strerror(errno)));
    return;
  }
  std::error_code ec;
  target_ = path_;
  if (std::filesystem::is_symlink(path_, ec)) target_ = std::filesystem::canonical(path_, ec).string();
  if (ec || target_.empty()) target_ = path_;
  const std::filesystem::path target(target_);
  if (!exists && target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
  // The temporary file sits beside the target (so the rename stays within one file system), with a unique
  // name (so two runs writing the same file never share one).
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::string name = (dir / ("." + target.filename().string() + ".XXXXXX.partial")).string();
  const int fd = mkstemps(name.data(), static_cast<int>(std::strlen(".partial")));
  if (fd < 0) throw input_error(fmt::format("cannot write {}: {}", path_, std::strerror(errno)));
  temp_ = name;
  if (register_temp(temp_) < 0) {
    ::close(fd);
    ::unlink(temp_.c_str());
    throw input_error(fmt::format("cannot write {}: too many output files open at once", path_));
  }
  if (exists) ::fchmod(fd, st.st_mode & 07777);  // keep the permissions of the file being replaced
  else {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    ::fchmod(fd, 0666 & ~mask);  // mkstemp creates 0600; a new output gets the usual permissions
  }
  stream_ = ::fdopen(fd, "wb");
  if (!stream_) {
    ::close(fd);
    abandon();
    throw input_error(fmt::format("cannot write {}: {}", path_, std::strerror(errno)));
  }
}

output_file::~output_file() {
  if (!done_) abandon();
}

void output_file::abandon() noexcept {
  if (stream_ && stream_ != stdout) std::fclose(stream_);
  stream_ = nullptr;
  if (!temp_.empty()) {
    ::unlink(temp_.c_str());
    unregister_temp(temp_);
  }
  done_ = true;
}

void output_file::write(const std::string& text) {
  if (!text.empty() && std::fwrite(text.data(), 1, text.size(), stream_) != text.size())
    throw input_error(fmt::format("writing {} failed: {}", path_ == "-" ? "standard output" : path_, std::strerror(errno)));
}

void output_file::commit() {
  const std::string shown = path_ == "-" ? "standard output" : path_;
  if (std::fflush(stream_) != 0 || std::ferror(stream_)) {
    const int err = errno;
    abandon();
    throw input_error(fmt::format("writing {} failed: {}", shown, std::strerror(err)));
  }
  if (stream_ == stdout) {
    done_ = true;
    return;
  }
  if (!temp_.empty() && ::fsync(fileno(stream_)) != 0) {
    const int err = errno;
    abandon();
    throw input_error(fmt::format("writing {} failed: {}", shown, std::strerror(err)));
  }
  const int closed = std::fclose(stream_);
  const int close_err = errno;
  stream_ = nullptr;
  if (closed != 0) {
    abandon();
    throw input_error(fmt::format("writing {} failed: {}", shown, std::strerror(close_err)));
  }
  if (!temp_.empty()) {
    if (std::rename(temp_.c_str(), target_.c_str()) != 0) {
      const int err = errno;
      abandon();
      throw input_error(fmt::format("cannot write {}: {}", shown, std::strerror(err)));
    }
    unregister_temp(temp_);
  }
  done_ = true;
}

void write_output(const std::string& path, const std::string& content) {
  output_file out(path);
  out.write(content);
  out.commit();
}

}  // namespace trainplan::cli
