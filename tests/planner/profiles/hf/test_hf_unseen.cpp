// --framework hf against runs it was not built from: the project's own collector (scripts/collect_hf.py)
// on an H100 on 2026-11-26 (data/measurements/), with torch 2.11 and transformers 5.17 as in the shared
// data. "extra": 13 configurations (Mistral- and Qwen2-shaped Llamas, amp-fp16 with a GradScaler, gradient
// accumulation, s8192 with and without checkpointing, LoRA through peft); "gaps": S1, S5 and S10 of the
// shared 14 measured again, with their allocator histories. From a second session the same day, "extra-2":
// E14-E21 (Mistral at s4096, LoRA with amp-bf16 and on the MLP with dropout, fp32 and eager attention with
// expandable segments, GPT-2 checkpointed with expandable segments, Phi-3); "histories": S6, E12 and E13 again
// with their allocator histories. From 2026-11-27: the shared 14 again, each in a process of its own, and
// E1-E14 again, all with their allocator histories.
#include <catch2/catch.hpp>
#include <cmath>
#include <fmt/format.h>

#include "planner/model/model_facts.hpp"
#include "planner/allocator/allocator_trace.hpp"
#include "planner/evaluate/plan.hpp"
#include "tests/support/measured_runs.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;

namespace {

double error_pct(double predicted, double measured) { return 100.0 * (predicted - measured) / measured; }

struct run_errors {
  double tensor_pct = 0, reserved_pct = 0;
};

// As plan check computes them: the tensors and PyTorch's cuBLAS workspaces (max_memory_allocated), the
// replayed segments and the workspaces (max_memory_reserved).
run_errors errors_of(const measured_run& r) {
  const gpu_spec& h100 = test::data().gpu("h100");
  const plan_result p = evaluate_plan(r.model, r.run, h100, test::data().calibration_for(h100));
  const allocator_replay sim = replay_schedule(plan_allocator_schedule(p, describe_model(r.model)));
  const double ws = static_cast<double>(p.overhead.cublas_workspace_bytes);
  return {error_pct(static_cast<double>(p.tensor_peak_bytes) + ws, static_cast<double>(r.alloc_peak_bytes)),
          error_pct(static_cast<double>(sim.peak_reserved_bytes) + ws, static_cast<double>(r.reserved_peak_bytes))};
}

// As plan check computes it: the context measured, plus what the plan's replay reserves in the GPU's memory
// (its own allocator: PyTorch's default or expandable segments, as the run had) and the cuBLAS workspaces.
double device_error_pct(const measured_run& r, std::uint64_t context_bytes) {
  const gpu_spec& h100 = test::data().gpu("h100");
  const plan_result p = evaluate_plan(r.model, r.run, h100, test::data().calibration_for(h100));
  REQUIRE(p.allocator.has_value());
  const double device = static_cast<double>(context_bytes + p.allocator->budget_reserved_bytes + p.overhead.cublas_workspace_bytes);
  return error_pct(device, static_cast<double>(context_bytes + r.reserved_peak_bytes));
}

constexpr double MiB = 1048576.0;

// The replay's reserved bytes with PyTorch's cuBLAS workspaces, as max_memory_reserved() counts them.
double replayed_reserved_bytes(const measured_run& r, const run_config& run) {
  const gpu_spec& h100 = test::data().gpu("h100");
  const plan_result p = evaluate_plan(r.model, run, h100, test::data().calibration_for(h100));
  return static_cast<double>(replay_schedule(plan_allocator_schedule(p, describe_model(r.model))).peak_reserved_bytes +
                             p.overhead.cublas_workspace_bytes);
}

// A run measured again in a process of its own (`own`) against the same configuration in the shared file
// (`shared`, marked with mark_one_process): the shared file measured its runs one after another in one process,
// so every run after its first found the cuBLAS workspaces the first had made. What the two measurements differ by
// in reserved bytes is what the replay says a run of its own reserves beyond the same run after another (its
// replay less its replay with the workspaces held, run_config::cublas_workspaces_held), 0 for the first run,
// which made them itself. Tolerance 32 MiB, every run: one cuBLAS workspace, a segment of its own or not as the
// process made it (28 MiB the largest miss when written). A run on an allocator edge differs by a segment of the
// loss's size instead (the checkpointed GPT-2: 758 MiB measured, 756 MiB replayed).
void check_own_process_difference(const measured_run& own, const measured_run& shared) {
  run_config after_another = own.run;
  after_another.cublas_workspaces_held = shared.run.cublas_workspaces_held;
  const double replayed = replayed_reserved_bytes(own, own.run) - replayed_reserved_bytes(own, after_another);
  const double measured = static_cast<double>(own.reserved_peak_bytes) - static_cast<double>(shared.reserved_peak_bytes);
  INFO("own process less shared: measured " << measured / MiB << " MiB, replayed " << replayed / MiB << " MiB");
  CHECK(std::abs(measured - replayed) <= 32 * MiB);
}

}  // namespace

TEST_CASE("hf profile: the second session's unseen runs, tensor peak within 3% and device peak within 5%",
          "[framework][hf][measured]") {
  const measured_file f = test::project_measurements("pytorch-hf-h100-2026-11-26-extra-2.jsonl");
  REQUIRE(f.runs.size() == 8);
  std::string table = "run   tensor error  device error\n";
  for (const measured_run& r : f.runs) {
    INFO(r.id);
    REQUIRE(describe_model(r.model).counts.total == r.params);
    const double tensor_pct = errors_of(r).tensor_pct, device_pct = device_error_pct(r, f.context_bytes);
    table += fmt::format("{:<5} {:>+11.2f}% {:>+11.2f}%\n", r.id, tensor_pct, device_pct);
    CHECK(std::abs(tensor_pct) <= 3.0);
    CHECK(std::abs(device_pct) <= 5.0);
  }
  WARN(table);
}

TEST_CASE("hf profile: unseen H100 runs, tensor peak within 3% and reserved within 5%", "[framework][hf][measured]") {
  const measured_file f = test::project_measurements("pytorch-hf-h100-2026-11-26-extra.jsonl");
  REQUIRE(f.runs.size() == 13);
  // E13 (GPT-2, adapters on q,k,v,o and the MLP) was 10% under until the replay followed GPT-2's forward op
  // by op and made PyTorch's cuBLAS workspaces where it does (its history: the test below). E12 (TinyLlama,
  // checkpointed) was +5.6% while the replay made each LoRA buffer (the adapters, their gradients and AdamW
  // states) one allocation of 17 MiB, which split a freed block of the loss's size: PyTorch holds each adapter
  // as its own tensor, under 1 MiB, in its small pool.
  std::string table = "run   tensor error  reserved error\n";
  for (const measured_run& r : f.runs) {
    INFO(r.id);
    REQUIRE(describe_model(r.model).counts.total == r.params);
    const run_errors e = errors_of(r);
    table += fmt::format("{:<5} {:>+11.2f}% {:>+13.2f}%\n", r.id, e.tensor_pct, e.reserved_pct);
    CHECK(std::abs(e.tensor_pct) <= 3.0);
    CHECK(std::abs(e.reserved_pct) <= 5.0);
  }
  WARN(table);
}

TEST_CASE("hf profile: shared runs measured again in processes of their own differ from the shared file as the replay says",
          "[framework][hf][measured]") {
  // The same configurations and software as the shared data, four days later on another H100 machine, each in a
  // process of its own. The first of the shared file reserved the same bytes, to the byte; a run after it 32 MiB
  // less (one cuBLAS workspace), or, on an allocator edge (GPT-2 checkpointed), 16% more (5.39 against 4.65 GiB)
  // with its tensor peak 2 MiB apart: one more segment of the loss's [b*s, V] fp32 size (786 MiB).
  const measured_file again = test::project_measurements("pytorch-hf-h100-2026-11-26-gaps.jsonl");
  measured_file shared = test::shared_h100_measurements();
  mark_one_process(shared);
  REQUIRE(again.runs.size() == 3);
  for (const measured_run& r : again.runs) {
    INFO(r.id);
    const measured_run* before = test::same_run_in(shared, r.id);
    REQUIRE(before != nullptr);
    // What the README says of the two measurements (checks of the committed data, not of the planner):
    CHECK(std::abs(error_pct(static_cast<double>(r.alloc_peak_bytes), static_cast<double>(before->alloc_peak_bytes))) < 0.1);
    // The planner's: the tensor peak within 3%, the reserved bytes within 5%, and the two measurements' difference.
    const run_errors e = errors_of(r);
    CHECK(std::abs(e.tensor_pct) <= 3.0);
    CHECK(std::abs(e.reserved_pct) <= 5.0);
    check_own_process_difference(r, *before);
  }
}

TEST_CASE("hf profile: runs measured again with their allocator histories, tensor peak within 3% and device peak within 5%",
          "[framework][hf][measured]") {
  const measured_file f = test::project_measurements("pytorch-hf-h100-2026-11-26-histories.jsonl");
  REQUIRE(f.runs.size() == 3);
  for (const measured_run& r : f.runs) {
    INFO(r.id);
    const double tensor_pct = errors_of(r).tensor_pct, device_pct = device_error_pct(r, f.context_bytes);
    CHECK(std::abs(tensor_pct) <= 3.0);
    CHECK(std::abs(device_pct) <= 5.0);
  }
}

// The shared data measured its 14 runs one after another in one process (one env line, one context): the
// checkpointed GPT-2 found the cuBLAS workspaces the first run had made, and reserved one loss segment (786 MiB)
// less than a run of its own. The third session measured all 14 as users run them, each in a process of its own:
// every device peak is then within 2.2% (+2.19% the largest when written), which is what issue 9 asks of the
// shared runs.
TEST_CASE("hf profile: the shared 14, each in a process of its own, every device peak within 5%", "[framework][hf][measured]") {
  const measured_file f = test::project_measurements("pytorch-hf-h100-2026-11-27-shared.jsonl");
  measured_file shared = test::shared_h100_measurements();
  mark_one_process(shared);
  REQUIRE(f.runs.size() == 14);
  std::string table = "run   tensor error  device error\n";
  for (const measured_run& r : f.runs) {
    INFO(r.id);
    const measured_run* before = test::same_run_in(shared, r.id);
    REQUIRE(before != nullptr);
    REQUIRE(describe_model(r.model).counts.total == r.params);
    // The same configuration as the shared run: the tensor peaks agree within 0.1% (a check of the data).
    CHECK(std::abs(error_pct(static_cast<double>(r.alloc_peak_bytes), static_cast<double>(before->alloc_peak_bytes))) < 0.1);
    const double tensor_pct = errors_of(r).tensor_pct, device_pct = device_error_pct(r, f.context_bytes);
    table += fmt::format("{:<5} {:>+11.2f}% {:>+11.2f}%\n", r.id, tensor_pct, device_pct);
    CHECK(std::abs(tensor_pct) <= 3.0);
    CHECK(std::abs(device_pct) <= 5.0);
    check_own_process_difference(r, *before);
  }
  WARN(table);
}

TEST_CASE("hf profile: the extra runs measured again, tensor peak within 3% and device peak within 5%", "[framework][hf][measured]") {
  const measured_file f = test::project_measurements("pytorch-hf-h100-2026-11-27-extra.jsonl");
  REQUIRE(f.runs.size() == 14);
  for (const measured_run& r : f.runs) {
    INFO(r.id);
    REQUIRE(describe_model(r.model).counts.total == r.params);
    CHECK(std::abs(errors_of(r).tensor_pct) <= 3.0);
    CHECK(std::abs(device_error_pct(r, f.context_bytes)) <= 5.0);
  }
}

// The collector's profiled step (--profile: the GPU's busy time, the union of its kernels' intervals) checks the
// roofline's device side apart from the host: the step's time by op class less the overhead, against busy_s.
// On the 35 runs profiled on an H100 (two machines, three sessions) it was within 23.3% (S3 on the faster
// host, -23.3%; median about 5%) when written: the bound here is 25%, each run. The kernel counts are
// reported, not asserted: the hf ops launch 5-25% fewer kernels than PyTorch's profiler counts.
TEST_CASE("hf profile: the roofline's kernel time is within 25% of the GPU's measured busy time", "[framework][hf][measured][time]") {
  const gpu_spec& h100 = test::data().gpu("h100");
  int profiled = 0;
  for (const char* file : {"pytorch-hf-h100-2026-11-26-extra.jsonl", "pytorch-hf-h100-2026-11-26-extra-2.jsonl",
                           "pytorch-hf-h100-2026-11-27-shared.jsonl"}) {
    const measured_file f = test::project_measurements(file);
    for (const measured_run& r : f.runs) {
      if (!r.gpu_profile) continue;
      INFO(file << " " << r.id);
      const plan_result p = evaluate_plan(r.model, r.run, h100, test::data().calibration_for(h100));
      CHECK(std::abs(error_pct(p.time.breakdown.kernel_seconds(), r.gpu_profile->busy_seconds)) <= 25.0);
      ++profiled;
    }
  }
  CHECK(profiled == 35);
}
