// A sweep on worker threads (sweep_runner.hpp): rounds of work units taken by whichever worker is free,
// handed back in order.
#include "planner/search/sweep_runner.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

#include "planner/allocator/program_cache.hpp"
#include "planner/evaluate/plan.hpp"

namespace trainplan {
namespace {

// Points a unit evaluates in each part: an analytic point takes about a microsecond, a replayed one
// (plan_result::allocator) one to fifteen milliseconds, so that smaller blocks keep every core busy.
constexpr std::uint64_t analytic_block_points = 4096;
constexpr std::uint64_t replayed_block_points = 16;
// Units per worker in a round of replayed points: a worker that finishes early takes the next unit, so that one
// slow unit (a model's longest sequences) does not hold every other worker idle until the round ends.
constexpr unsigned units_per_worker = 4;
// The most rows a sweep keeps aside to evaluate GPUs side by side (one model's rows on every GPU but the first,
// until the model ends: about 400 bytes of CSV a row, so some 800 MB in a temporary file). A larger sweep is
// evaluated in index order, as fast as before this existed, rather than fill a small /tmp.
constexpr std::uint64_t max_kept_rows = 2'000'000;

}  // namespace

unsigned sweep_workers(unsigned threads) { return threads == 0 ? std::max(1u, std::thread::hardware_concurrency()) : threads; }

sweep_schedule schedule_sweep(const sweep_space& space, unsigned threads, bool replay) {
  sweep_schedule s;
  s.workers = sweep_workers(threads);
  replay = replay && replays_allocator(space.base);
  s.block_points = replay ? replayed_block_points : analytic_block_points;
  // (An analytic unit's points cost about the same: one a worker, which also bounds the text a round holds.)
  s.slots = replay && s.workers > 1 ? s.workers * units_per_worker : s.workers;
  const std::uint64_t total = space.size();
  const std::uint64_t per_gpu = total == 0 ? 0 : total / (space.models.size() * space.gpus.size());
  if (replay && total > 0 && space.gpus.size() > 1 && per_gpu <= max_kept_rows / (space.gpus.size() - 1)) {
    s.parts = space.gpus.size();
    s.part_points = per_gpu;
  } else {
    s.part_points = total;
  }
  return s;
}

void run_sweep_blocks(const sweep_space& space, const sweep_schedule& schedule, bool replay,
                      const std::function<void(unsigned slot, std::uint64_t part, const sweep_result& result)>& row,
                      const std::function<void(unsigned slot, const sweep_block& block)>& block_done) {
  const std::uint64_t total = space.size();
  if (total == 0) return;
  const std::uint64_t parts = schedule.parts, part_points = schedule.part_points, block_points = schedule.block_points;
  const std::uint64_t groups = total / (parts * part_points);   // models (or 1, the whole space, for one part)
  const std::uint64_t units_per_group = (part_points + block_points - 1) / block_points;
  const std::uint64_t units = groups * units_per_group;
  std::vector<program_cache> programs;  // a worker's, kept from unit to unit
  for (unsigned w = 0; w < schedule.workers; ++w) programs.emplace_back(program_cache::bytes_per_worker(schedule.workers));
  std::vector<std::vector<sweep_block>> blocks(schedule.slots, std::vector<sweep_block>(parts));
  // What a worker threw (an internal error, or the row callback's), rethrown once every worker has joined, as
  // a sweep on one thread would throw it, instead of ending the process from the worker.
  std::vector<std::exception_ptr> thrown(schedule.workers);

  auto evaluate_unit = [&](unsigned worker, unsigned slot, std::uint64_t unit) {
    const std::uint64_t group = unit / units_per_group;
    const std::uint64_t from = unit % units_per_group * block_points, to = std::min(part_points, from + block_points);
    std::vector<sweep_block>& bl = blocks[slot];
    for (std::uint64_t p = 0; p < parts; ++p) {
      const std::uint64_t base = (group * parts + p) * part_points;
      bl[p] = {base + from, base + to, 0, 0, p};
    }
    plan_reuse reuse;
    reuse.programs = &programs[worker];
    // Row by row, each on every GPU in turn: the same schedules meet the same worker's cache one after another.
    for (std::uint64_t k = from; k < to; ++k)
      for (std::uint64_t p = 0; p < parts; ++p) {
        const sweep_result res = evaluate_point(space.at((group * parts + p) * part_points + k), &reuse, replay);
        bl[p].fitting += res.plan && res.plan->fits;
        bl[p].invalid += !res.plan;
        row(slot, p, res);
      }
  };

  for (std::uint64_t next = 0; next < units;) {
    const std::uint64_t round = std::min<std::uint64_t>(schedule.slots, units - next);
    std::atomic<std::uint64_t> taken{0};
    auto work = [&](unsigned worker) {
      try {
        for (std::uint64_t slot; (slot = taken.fetch_add(1)) < round;)
          evaluate_unit(worker, static_cast<unsigned>(slot), next + slot);
      } catch (...) {
        thrown[worker] = std::current_exception();
        taken.store(round);  // the others stop after their unit
      }
    };
    std::vector<std::thread> workers;
    const unsigned used = static_cast<unsigned>(std::min<std::uint64_t>(schedule.workers, round));
    for (unsigned w = 1; w < used; ++w) workers.emplace_back(work, w);
    work(0);  // this thread works too
    for (std::thread& w : workers) w.join();
    for (const std::exception_ptr& e : thrown)
      if (e) std::rethrow_exception(e);
    for (unsigned slot = 0; slot < round; ++slot)
      for (const sweep_block& b : blocks[slot]) block_done(slot, b);
    next += round;
  }
}

}  // namespace trainplan
