// A sweep on worker threads (sweep_runner.hpp): blocks of consecutive points evaluated in parallel and handed
// back in index order.
#include "planner/search/sweep_runner.hpp"

#include <algorithm>
#include <exception>
#include <thread>
#include <vector>

#include "planner/allocator/program_cache.hpp"
#include "planner/evaluate/plan.hpp"

namespace trainplan {
namespace {

// Points a worker evaluates before the blocks are handed back in order: an analytic point takes about a
// microsecond, a replayed one (plan_result::allocator) one to fifteen milliseconds, so that smaller blocks keep
// every core busy.
constexpr std::uint64_t analytic_block_points = 4096;
constexpr std::uint64_t replayed_block_points = 16;

}  // namespace

unsigned sweep_workers(unsigned threads) { return threads == 0 ? std::max(1u, std::thread::hardware_concurrency()) : threads; }

void run_sweep_blocks(const sweep_space& space, unsigned threads, bool replay,
                      const std::function<void(unsigned worker, const sweep_result& result)>& row,
                      const std::function<void(unsigned worker, const sweep_block& block)>& block_done) {
  const std::uint64_t total = space.size();
  threads = sweep_workers(threads);
  std::vector<sweep_block> blocks(threads);
  const std::uint64_t block_points = replay && replays_allocator(space.base) ? replayed_block_points : analytic_block_points;
  std::vector<program_cache> programs;  // a worker's, kept from block to block
  for (unsigned w = 0; w < threads; ++w) programs.emplace_back(program_cache::bytes_per_worker(threads));
  // What a worker threw (an internal error, or the row callback's), rethrown once every worker has joined, as
  // a sweep on one thread would throw it, instead of ending the process from the worker.
  std::vector<std::exception_ptr> thrown(threads);
  auto fill_or_throw = [&](unsigned worker, std::uint64_t first, std::uint64_t last) {
    sweep_block& bl = blocks[worker];
    bl = {first, last, 0, 0};
    plan_reuse reuse;
    reuse.programs = &programs[worker];
    for (std::uint64_t k = first; k < last; ++k) {
      const sweep_result res = evaluate_point(space.at(k), &reuse, replay);
      bl.fitting += res.plan && res.plan->fits;
      bl.invalid += !res.plan;
      row(worker, res);
    }
  };
  auto fill = [&](unsigned worker, std::uint64_t first, std::uint64_t last) {
    try {
      fill_or_throw(worker, first, last);
    } catch (...) {
      thrown[worker] = std::current_exception();
    }
  };
  for (std::uint64_t next = 0; next < total;) {
    std::vector<std::thread> workers;
    std::uint64_t first = next;
    unsigned used = 0;
    for (; used < threads && first < total; ++used) {
      const std::uint64_t last = std::min(total, first + block_points);
      if (used + 1 == threads || last == total) fill(used, first, last);  // this thread works too
      else workers.emplace_back(fill, used, first, last);
      first = last;
    }
    for (std::thread& w : workers) w.join();
    for (unsigned k = 0; k < used; ++k)
      if (thrown[k]) std::rethrow_exception(thrown[k]);
    for (unsigned k = 0; k < used; ++k) block_done(k, blocks[k]);
    next = first;
  }
}

}  // namespace trainplan
