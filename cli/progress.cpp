// Progress on a terminal (progress.hpp): a thread that wakes five times a second and, after the first second,
// redraws one line on stderr with "\r" and erase-to-end-of-line.
#include "cli/progress.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <unistd.h>

namespace trainplan::cli {
namespace {

constexpr auto quiet_for = std::chrono::seconds(1);  // shorter work shows nothing
constexpr auto redraw_every = std::chrono::milliseconds(200);

void put(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

}  // namespace

bool progress::terminal() { return ::isatty(STDERR_FILENO) == 1; }

progress::progress(std::string label, std::uint64_t total, std::string unit, bool enabled)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), start_(std::chrono::steady_clock::now()) {
  if (enabled && terminal()) thread_ = std::thread([this] { run(); });
}

progress::~progress() { finish(); }

void progress::finish() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  if (drawn_) put("\r\x1b[K");
}

std::string progress::line(std::chrono::steady_clock::duration elapsed) const {
  const double seconds = std::chrono::duration<double>(elapsed).count();
  const std::uint64_t done = done_.load(std::memory_order_relaxed);
  if (total_ > 0) {
    const double share = std::min(1.0, static_cast<double>(done) / static_cast<double>(total_));
    constexpr int width = 30;
    const int filled = static_cast<int>(width * share);
    return fmt::format("{}: [{:#<{}}{:<{}}] {:3.0f}% {}/{}{}{}, {:.0f} s", label_, "", filled, "", width - filled,
                       100 * share, done, total_, unit_.empty() ? "" : " ", unit_, seconds);
  }
  if (done > 0) return fmt::format("{}: {} {}, {:.0f} s", label_, done, unit_, seconds);
  return fmt::format("{}: {:.0f} s", label_, seconds);
}

void progress::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (wake_.wait_for(lock, quiet_for, [this] { return stop_; })) return;
  do {
    put(fmt::format("\r{}\x1b[K", line(std::chrono::steady_clock::now() - start_)));
    drawn_ = true;
  } while (!wake_.wait_for(lock, redraw_every, [this] { return stop_; }));
}

}  // namespace trainplan::cli
