#pragma once
// Progress on a terminal for a command that runs longer than a second (sweep, max, validate, plot, check): one
// line on stderr, redrawn in place by a background thread and erased when the work is done. Drawn only when
// stderr is a terminal: never into a file or a pipe, and never on stdout, so piped data never holds it.
//
//   progress bar("plan sweep", rows, "configurations");  // nothing shows in the first second
//   ... bar.set(rows_done); ...                           // from any thread
//   // the destructor (or finish()) erases the line before the result is printed
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace trainplan::cli {

class progress {
 public:
  // label: what runs ("plan validate: 2 steps on the cpu backend"); total: the steps it takes, 0 when unknown (the
  // line then shows the steps done, if any, and the time); unit: what a step is ("configurations"). enabled: false
  // for --quiet, or where what the command prints as it goes shows its progress already.
  explicit progress(std::string label, std::uint64_t total = 0, std::string unit = "", bool enabled = true);
  ~progress();
  progress(const progress&) = delete;
  progress& operator=(const progress&) = delete;

  void set(std::uint64_t done) { done_.store(done, std::memory_order_relaxed); }
  void advance(std::uint64_t steps = 1) { done_.fetch_add(steps, std::memory_order_relaxed); }
  // Stops the thread and erases the line (the destructor does too): call before printing the result.
  void finish();

  // Whether stderr is a terminal, which progress is drawn on.
  static bool terminal();

 private:
  void run();
  std::string line(std::chrono::steady_clock::duration elapsed) const;

  std::string label_, unit_;
  std::uint64_t total_ = 0;
  std::atomic<std::uint64_t> done_{0};
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool drawn_ = false;  // a line is on the terminal: finish() erases it
  std::thread thread_;
};

}  // namespace trainplan::cli
