#pragma once
// A whole sweep evaluated on worker threads, in blocks of consecutive points handed back so that the caller can
// write them in index order, and memory stays constant however large the sweep. Each block is evaluated with one
// plan_reuse (consecutive accumulations share their inventory) and each result handed, on the worker's thread,
// to the caller (which turns it into a row of text, say); the calling thread then takes the blocks.
//
// With the allocator replay and several GPUs, one model's points on each GPU are evaluated side by side: a
// work unit is the same block of rows on every GPU (the GPU is the sweep's second digit from the left, so those
// rows lie a whole GPU's share of the space apart). The replay's programs do not depend on the GPU (the default
// allocator's: planner/allocator/program_cache.cpp) and a program's replays answer every capacity that makes
// the same replay (planner/allocator/known_replays.hpp), so the replay with no limit and, for a run that fits
// no GPU, every probe of the search for its least memory are made once for all the GPUs, where a worker's
// cache would long have dropped them by the time the next GPU's rows came in index order (about half the time
// of a five-GPU sweep: docs/allocator-speed.md). Where a model's rows on the other GPUs would pass two million
// (kept aside until the model ends), the sweep runs in index order instead.
#include <cstdint>
#include <functional>

#include "planner/search/sweep.hpp"

namespace trainplan {

// How a sweep is cut up and shared among threads.
struct sweep_schedule {
  unsigned workers = 1;             // threads, the calling one included
  unsigned slots = 1;               // work units per round, taken by whichever worker is free
  std::uint64_t block_points = 1;   // a unit's rows (in each part)
  std::uint64_t parts = 1;          // GPUs evaluated side by side (1: the space in index order)
  std::uint64_t part_points = 0;    // one model's points on one GPU: where part p of model m starts is
                                    // (m * parts + p) * part_points
};

// `threads`: 0 for every core. `replay`: whether the points replay the allocator (smaller blocks, GPUs side
// by side).
sweep_schedule schedule_sweep(const sweep_space& space, unsigned threads, bool replay);

// One block a unit evaluated: points [first, last) of part `part`, how many fit and how many cannot run.
struct sweep_block {
  std::uint64_t first = 0, last = 0;
  std::uint64_t fitting = 0, invalid = 0;
  std::uint64_t part = 0;
};

// Evaluates every point of `space` (evaluate_point, with the allocator replay when `replay`) as `schedule`
// says. `row(slot, part, result)` runs on a worker's thread for each point of a unit, each part's in index
// order; `block_done(slot, block)` on the calling thread, after each round, for its units in order and each
// unit's parts in order. So part 0's blocks come in index order, and the other parts' blocks of a model come
// before all of its part 0 has: a caller writing in index order writes part 0's as they come and keeps the
// others aside, then writes what it kept, part by part, after the block of the last part that ends the model
// (block.last a multiple of part_points).
void run_sweep_blocks(const sweep_space& space, const sweep_schedule& schedule, bool replay,
                      const std::function<void(unsigned slot, std::uint64_t part, const sweep_result& result)>& row,
                      const std::function<void(unsigned slot, const sweep_block& block)>& block_done);

// The workers a sweep runs on: `threads`, or every core for 0.
unsigned sweep_workers(unsigned threads);

}  // namespace trainplan
