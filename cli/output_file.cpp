// Writing a file (output_file.hpp): to a temporary beside the target, fsync'd and renamed over it; a process's
// descriptor or a device written directly; temporaries removed on a signal with async-signal-safe calls only.
#include "cli/output_file.hpp"

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <memory>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "planner/util/input_error.hpp"
#include "planner/util/text_file.hpp"

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

// The descriptor a path names when it is one of this process's open descriptors (/dev/stdout, /dev/stderr,
// /dev/fd/N, /proc/self/fd/N, /proc/<own pid>/fd/N); -1 otherwise. Such a path is written through the
// descriptor itself: reopening it would truncate what the shell opened for appending, and renaming over
// the file it links to would replace that file.
int named_descriptor(const std::string& path) {
  if (path == "/dev/stdout") return STDOUT_FILENO;
  if (path == "/dev/stderr") return STDERR_FILENO;
  const std::string own_pid = "/proc/" + std::to_string(::getpid()) + "/fd/";
  for (const std::string& prefix : {std::string("/dev/fd/"), std::string("/proc/self/fd/"), std::string("/proc/thread-self/fd/"), own_pid}) {
    if (path.size() <= prefix.size() || path.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = path.substr(prefix.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stoi(digits);
  }
  return -1;
}

// Where a symbolic link finally points, resolved link by link (a relative target from its link's folder),
// whether or not that target exists yet: a dangling link is followed to the file it names, not replaced.
std::string link_target(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path p(path);
  std::error_code ec;
  for (int hops = 0; hops < 40 && fs::is_symlink(p, ec); ++hops) {
    const fs::path to = fs::read_symlink(p, ec);
    if (ec) return path;
    p = to.is_absolute() ? to : (p.parent_path() / to).lexically_normal();
  }
  return fs::is_symlink(p, ec) ? path : p.string();  // a loop: left to the rename, which fails on it
}

}  // namespace

bool reader_gone(std::FILE* stream, int err) {
  if (err == EPIPE) return true;
  if (!stream) return false;
  const int fd = ::fileno(stream);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) return false;
  pollfd p{fd, POLLOUT, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)) != 0;
}

void throw_write_error(std::FILE* stream, int err, std::string_view what) {
  if (reader_gone(stream, err)) throw output_closed();
  throw input_error(fmt::format("writing {} failed: {}", what, std::strerror(err)));
}

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
  if (const int fd = named_descriptor(path_); fd >= 0) {
    if (fd == STDOUT_FILENO) {  // the same stream as everything else printed, in order
      stream_ = stdout;
      return;
    }
    const int copy = ::dup(fd);
    if (copy < 0 || !(stream_ = ::fdopen(copy, "wb"))) {
      const int err = errno;
      if (copy >= 0) ::close(copy);
      throw input_error(fmt::format("cannot write {}: {}", path_, std::strerror(err)));
    }
    return;
  }
  struct stat st {};
  const bool exists = ::stat(path_.c_str(), &st) == 0;  // follows symbolic links
  if (exists && S_ISDIR(st.st_mode)) throw input_error(fmt::format("cannot write {}: it is a folder", path_));
  // "new/" names a folder that does not exist yet: refused before any folder is made for it.
  if (!exists && path_.back() == '/') throw input_error(fmt::format("cannot write {}: it names a folder, not a file", path_));
  if (exists && !S_ISREG(st.st_mode)) {
    // A device, FIFO, socket or terminal: write into it, never replace it. A FIFO is opened without
    // blocking, so that one nobody reads is an error rather than a hang (open(2): ENXIO).
    const int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      throw input_error(err == ENXIO ? fmt::format("cannot write {}: no process is reading it", path_)
                                     : fmt::format("cannot write {}: {}", path_, std::strerror(err)));
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);  // then written as any file
    stream_ = ::fdopen(fd, "wb");
    if (!stream_) {
      const int err = errno;
      ::close(fd);
      throw input_error(fmt::format("cannot write {}: {}", path_, std::strerror(err)));
    }
    return;
  }
  // An input of this same command (a report, a config) is never replaced by its output.
  if (exists && is_input_file(path_))
    throw input_error(fmt::format("cannot write {}: this command reads it as an input, which the output would replace", path_));
  target_ = link_target(path_);
  // A file the user may not write is not replaced behind its permissions (the rename only needs the folder).
  // Root may write anything (access(2) says yes), so a file with no write bit at all is refused by its mode.
  if (exists && (st.st_mode & 0222) == 0)
    throw input_error(fmt::format("cannot write {}: it is read-only (mode {:04o})", path_, st.st_mode & 07777));
  if (exists && ::access(target_.c_str(), W_OK) != 0)
    throw input_error(fmt::format("cannot write {}: {}", path_, std::strerror(errno)));
  std::error_code ec;
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
  if (stream_ && stream_ != stdout) std::fclose(stream_);  // a descriptor's stream holds a dup of it
  stream_ = nullptr;
  if (!temp_.empty()) {
    ::unlink(temp_.c_str());
    unregister_temp(temp_);
  }
  done_ = true;
}

void output_file::write(std::string_view text) {
  if (!text.empty() && std::fwrite(text.data(), 1, text.size(), stream_) != text.size())
    throw_write_error(stream_, errno, path_ == "-" ? "standard output" : path_);
}

void output_file::commit() {
  const std::string shown = path_ == "-" ? "standard output" : path_;
  if (std::fflush(stream_) != 0 || std::ferror(stream_)) {
    const int err = errno;
    const bool gone = reader_gone(stream_, err);
    abandon();
    if (gone) throw output_closed();
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
    if (close_err == EPIPE) throw output_closed();
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

void write_outputs(const std::vector<std::pair<std::string, std::string>>& path_and_content) {
  std::vector<std::unique_ptr<output_file>> outs;
  for (const auto& [path, content] : path_and_content) {
    outs.push_back(std::make_unique<output_file>(path));
    outs.back()->write(content);
  }
  for (const auto& out : outs) out->commit();
}

}  // namespace trainplan::cli
