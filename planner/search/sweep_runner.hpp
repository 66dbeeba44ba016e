#pragma once
// A whole sweep evaluated on worker threads, in blocks of consecutive points handed back in index order, so
// that memory stays constant however large the sweep. Each worker evaluates its block with one plan_reuse
// (consecutive accumulations share their inventory) and hands each result, on its own thread, to the caller
// (which turns it into a row of text, say); the calling thread then takes the blocks in order.
#include <cstdint>
#include <functional>

#include "planner/search/sweep.hpp"

namespace trainplan {

// One block a worker evaluated: points [first, last), how many fit and how many cannot run.
struct sweep_block {
  std::uint64_t first = 0, last = 0;
  std::uint64_t fitting = 0, invalid = 0;
};

// The workers a sweep runs on: `threads`, or every core for 0.
unsigned sweep_workers(unsigned threads);

// Evaluates every point of `space` (evaluate_point, with the allocator replay when `replay`) on
// sweep_workers(threads) threads, the calling thread one of them. `row(worker, result)` runs on the worker's
// thread for each point of its block in order; `block_done(worker, block)` on the calling thread, for the blocks
// of each round in index order, after every worker of the round finished.
void run_sweep_blocks(const sweep_space& space, unsigned threads, bool replay,
                      const std::function<void(unsigned worker, const sweep_result& result)>& row,
                      const std::function<void(unsigned worker, const sweep_block& block)>& block_done);

}  // namespace trainplan
