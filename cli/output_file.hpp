#pragma once
// The one way `plan` writes a file (-o, --emit, reports, calibration, plots).
//   - "-" is standard output.
//   - A regular file, or a path that does not exist yet, is written atomically: to a temporary file in the
//     same folder, flushed with fsync, then renamed over the target. A failure or an interrupt never leaves
//     a truncated file where a good one was, and never leaves the temporary file behind.
//   - A path naming one of the process's descriptors (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N)
//     is written through that descriptor: `>> log` keeps its content, the file behind it is never replaced.
//   - Anything else that exists (/dev/null, a FIFO, a terminal, a device) is opened and written directly.
//     It is never replaced: renaming over /dev/null as root destroys the device. A FIFO nobody reads is an
//     error, not a hang.
//   - A symbolic link is followed, link by link, even when its target does not exist yet: the target is
//     what gets written, the link stays.
//   - An existing file that is read-only (no write bit in its mode, even for root, whom access(2) lets write
//     anything) or that the user may not write (access(2)) is refused, as the shell refuses `> file`.
// Write errors (a full disk) throw input_error naming the file (exit 2). A pipe whose reader has gone
// (`plan ... | head -1`) throws output_closed: main ends quietly, as other Unix tools do.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trainplan::cli {

// Nobody reads the output any more (EPIPE): not an error of the user's; main exits 0 without a message.
class output_closed : public std::runtime_error {
 public:
  output_closed() : std::runtime_error("the reader of the output has gone") {}
};

// Whether a failed write to `stream` failed because its reader has gone: errno EPIPE, or a pipe or socket whose
// other end is closed (poll(2) POLLERR/POLLHUP) when errno no longer says so.
bool reader_gone(std::FILE* stream, int err);

// Throws output_closed when the reader of `stream` has gone, else input_error "writing <what> failed: <why>".
[[noreturn]] void throw_write_error(std::FILE* stream, int err, std::string_view what);

class output_file {
 public:
  explicit output_file(std::string path);
  ~output_file();  // not committed: the temporary file is removed, the target untouched
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;

  std::FILE* stream() { return stream_; }
  void write(std::string_view text);
  // Flushes, syncs and (for a regular file) renames into place. Throws input_error on failure.
  void commit();
  const std::string& path() const { return path_; }
  bool is_stdout() const { return stream_ == stdout; }

 private:
  void abandon() noexcept;
  std::string path_;     // as the user gave it
  std::string target_;   // where the rename goes (a symbolic link resolved)
  std::string temp_;     // empty when written directly
  std::FILE* stream_ = nullptr;
  bool done_ = false;
};

// Writes `content` to `path` through output_file (creating missing parent folders for regular files).
void write_output(const std::string& path, const std::string& content);

// Several files that belong together (a config and its LoRA file): each is opened and written before any is
// committed, so that one refused or failing leaves none of them written.
void write_outputs(const std::vector<std::pair<std::string, std::string>>& path_and_content);

// Installs SIGINT/SIGTERM handlers that remove every temporary file still open, then exit 130 / 143;
// ignores SIGPIPE so that a closed pipe is a failed write (output_closed) that temporary files are removed
// after, not a death that leaves them. Called once by main.
void install_output_signal_handlers();

}  // namespace trainplan::cli
