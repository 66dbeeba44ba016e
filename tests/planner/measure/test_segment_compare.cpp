// Segment by segment (planner/measure/segment_compare.hpp): a measured run's segments against the replay's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "planner/model/model_facts.hpp"
#include "planner/allocator/allocator_trace.hpp"
#include "planner/measure/segment_compare.hpp"
#include "tests/support/measured_runs.hpp"
#include "tests/support/plan_helpers.hpp"

using namespace trainplan;

namespace {
constexpr std::uint64_t MiB = 1ull << 20;
}

TEST_CASE("segments: sizes whose counts differ, largest difference first, the replay's last-made named", "[allocator][segments]") {
  const std::vector<measured_segment> measured = {
      {false, 786 * MiB}, {false, 20 * MiB}, {false, 786 * MiB}, {true, 2 * MiB}, {true, 2 * MiB}, {false, 20 * MiB}, {false, 394 * MiB}};
  const std::vector<allocator_growth> replayed = {
      {"weights", 0, -1, 20 * MiB, false},   {"logits", 0, 0, 394 * MiB, false},  {"log_probs", 0, 0, 786 * MiB, false},
      {"grad", 0, 0, 786 * MiB, false},      {"bias", 0, 0, 2 * MiB, true},       {"log_probs", 0, 1, 786 * MiB, false},
      {"grad", 0, 1, 786 * MiB, false},      {"state", 0, 0, 48 * MiB, false}};
  const segment_comparison c = compare_segments(measured, replayed);
  CHECK(c.measured_count == 7);
  CHECK(c.measured_bytes == (2 * 786 + 2 * 20 + 2 * 2 + 394) * MiB);
  CHECK(c.replayed_count == 8);
  CHECK(c.replayed_bytes == (4 * 786 + 20 + 394 + 2 + 48) * MiB);
  CHECK(c.matched_count == 2 + 1 + 1 + 1);  // 786 twice, 20, 2 (small), 394
  REQUIRE(c.differences.size() == 4);
  // 786 MiB: two more in the replay, the two it made last (step 1's), in the order it made them.
  CHECK(c.differences[0].bytes == 786 * MiB);
  CHECK(c.differences[0].measured == 2);
  CHECK(c.differences[0].replayed == 4);
  CHECK(c.differences[0].difference_bytes() == 2 * 786 * static_cast<std::int64_t>(MiB));
  REQUIRE(c.differences[0].replay_extra.size() == 2);
  CHECK(c.differences[0].replay_extra[0].tensor == "log_probs");
  CHECK(c.differences[0].replay_extra[0].step == 1);
  CHECK(c.differences[0].replay_extra[1].tensor == "grad");
  CHECK(c.differences[1].bytes == 48 * MiB);  // one the measurement lacks
  CHECK(c.differences[1].replay_extra.size() == 1);
  // Fewer in the replay: a negative difference and nothing to name. Equal magnitudes: the larger size first.
  CHECK(c.differences[2].bytes == 20 * MiB);
  CHECK(c.differences[2].difference_bytes() == -20 * static_cast<std::int64_t>(MiB));
  CHECK(c.differences[2].replay_extra.empty());
  CHECK(c.differences[3].small_pool);
  CHECK(c.differences[3].bytes == 2 * MiB);
  CHECK(c.differences[3].difference_bytes() == -2 * static_cast<std::int64_t>(MiB));
  // The same segments in another order: nothing differs.
  std::vector<measured_segment> same;
  for (const allocator_growth& g : replayed) same.push_back({g.small_pool, g.added_bytes});
  std::reverse(same.begin(), same.end());
  const segment_comparison none = compare_segments(same, replayed);
  CHECK(none.differences.empty());
  CHECK(none.matched_count == replayed.size());
}

TEST_CASE("segments: a replay's growth is its segments, each of a size PyTorch's default allocator makes", "[measured][allocator][segments][hf]") {
  // Over the 14 shared runs: one growth entry a new segment (no capacity, so nothing is given back), all of
  // them summing to what the replay reserves at its peak; a small-pool segment is kSmallBuffer (2 MiB), a
  // large-pool one kLargeBuffer (20 MiB) or a request of 10 MiB or more rounded up to 2 MiB.
  for (const measured_run& r : test::shared_h100_measurements().runs) {
    INFO(r.id);
    const plan_result p = test::plan_of(r.model, r.run);
    std::vector<allocator_growth> growth;
    const allocator_replay replay = replay_allocator(p.inv, describe_model(r.model), r.run.grad_accum, 3, &growth);
    std::uint64_t sum = 0;
    for (const allocator_growth& g : growth) {
      sum += g.added_bytes;
      if (g.small_pool) CHECK(g.added_bytes == 2 * MiB);
      else CHECK((g.added_bytes == 20 * MiB || (g.added_bytes >= 10 * MiB && g.added_bytes % (2 * MiB) == 0)));
    }
    CHECK(sum == replay.peak_reserved_bytes);
    CHECK(replay.segments_made == growth.size());  // memory_stats()'s num_device_alloc, as plan check prints it
    // Measured as the replay made them: the comparison finds nothing.
    std::vector<measured_segment> as_replayed;
    for (const allocator_growth& g : growth) as_replayed.push_back({g.small_pool, g.added_bytes});
    CHECK(compare_segments(as_replayed, growth).differences.empty());
  }
}

TEST_CASE("segments: with the forward op by op, the replay reserves PyTorch's segments", "[measured][allocator][segments][hf]") {
  // Every run of the project's reports that recorded its segments under PyTorch's default allocator and whose
  // forward the replay follows op by op (inventory::forward_in_program_order; the others keep coarse rows, and
  // expandable segments map address ranges, not segments). Each replay, its two cuBLAS workspaces included, makes
  // PyTorch's segments size for size and reserves what PyTorch reserved to the byte, or one 2 MiB small-pool
  // segment short: a 1 MiB block some runs keep (the Qwen2 shape's cuBLASLt workspace comes at q_proj, later than
  // the replay makes it, where another small segment has room). Before the forward was listed op by op the
  // LoRA'd GPT-2 reserved 10% less, the checkpointed one 2.5% less, and the autocast Llama matched 88 of its 109
  // segments; GPT-2's runs were one small segment short until the replay made PyTorch's cuBLASLt workspace (a
  // 1 MiB block kept from the first GEMM with a bias: allocator_schedule::lt_workspace_bytes).
  //
  // Not every run is that close yet: the 22-layer TinyLlama makes one 32 MiB segment where PyTorch made a 16 MiB
  // one (16 MiB over), and the fp32 GPT-2 one 32 MiB segment PyTorch did not make (32 MiB over). So each run is
  // checked within one segment either way and 32 MiB (one cuBLAS workspace), and the runs not exact (or one small
  // segment short) are counted: no more than the two of when this was written.
  std::string table = "report             run  measured replayed matched  MiB short\n";
  int compared = 0, not_exact = 0;
  for (const std::string& name : test::project_measurement_files()) {
    const measured_file f = test::project_measurements(name);
    for (const measured_run& r : f.runs) {
      if (r.segments.empty() || r.run.expandable_segments) continue;
      const plan_result p = test::plan_of(r.model, r.run);
      if (!p.inv.forward_in_program_order) continue;
      INFO(name << " " << r.id);
      std::vector<allocator_growth> growth;
      const allocator_replay replay = replay_schedule(plan_allocator_schedule(p, describe_model(r.model)), &growth);
      const segment_comparison c = compare_segments(r.segments, growth);
      // The peak with the workspaces, as PyTorch's max_memory_reserved() counts them.
      const std::int64_t short_bytes = static_cast<std::int64_t>(r.reserved_peak_bytes) -
                                       static_cast<std::int64_t>(replay.peak_reserved_bytes + p.overhead.cublas_workspace_bytes);
      // Exact: every replayed segment is one of PyTorch's, and at most one 2 MiB small-pool segment is short.
      const bool one_small_short_at_most = c.replayed_count <= c.measured_count && c.measured_count <= c.replayed_count + 1 &&
                                           c.measured_bytes == c.replayed_bytes + (c.measured_count - c.replayed_count) * 2 * MiB;
      const bool exact = c.matched_count == c.replayed_count && one_small_short_at_most &&
                         short_bytes == static_cast<std::int64_t>((c.measured_count - c.replayed_count) * 2 * MiB);
      std::string report = name.substr(0, name.size() - 6);  // "2026-11-26-extra-2" of "pytorch-hf-h100-2026-11-26-extra-2.jsonl"
      if (report.starts_with("pytorch-hf-h100-")) report = report.substr(16);
      table += fmt::format("{:<18} {:<4} {:>8} {:>8} {:>7} {:>+10.0f}{}\n", report, r.id,
                           c.measured_count, c.replayed_count, c.matched_count, static_cast<double>(short_bytes) / MiB,
                           exact ? "" : "  (not exact)");
      CHECK(c.matched_count + 1 >= c.measured_count);
      CHECK(c.matched_count + 1 >= c.replayed_count);
      CHECK(std::abs(short_bytes) <= static_cast<std::int64_t>(32 * MiB));
      not_exact += exact ? 0 : 1;
      ++compared;
    }
  }
  WARN(table);
  CHECK(compared == 46);  // 46 of the 52 runs when written: 3 with expandable segments, 5 with coarse rows
  CHECK(not_exact <= 2);
}
