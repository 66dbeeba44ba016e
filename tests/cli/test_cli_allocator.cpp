// --expandable-segments: PyTorch's allocator under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, as a run
// option, in the report and the JSON, as a suggestion and a search lever (planner/allocator/expandable_allocator.hpp).
#include <catch2/catch.hpp>

#include <cmath>

#include <nlohmann/json.hpp>

#include "run_plan.hpp"

using namespace trainplan::test;
using json = nlohmann::json;

namespace {
// TinyLlama at seq 512, micro-batch 47, amp-bf16 on an H100: its tensors fit (78.5 GiB with the context and
// workspaces), but the default allocator's segments, split by live tensors, need 1.49 GiB more than the GPU has.
const std::string fragmented = "--model tinyllama-1.1b --seq 512 --micro-batch 47 --gpu h100";
}  // namespace

TEST_CASE("expandable segments fit a run the default allocator's fragmentation does not", "[cli][expandable]") {
  const plan_run plain = run_plan(fragmented + " --json --suggestions 0");
  REQUIRE(plain.exit_code == 1);
  const json p = json::parse(plain.out);
  CHECK(p["memory"]["allocator"]["tensors_fit"] == true);
  CHECK(p["run"]["expandable_segments"] == false);
  const plan_run grown = run_plan(fragmented + " --json --expandable-segments");
  REQUIRE(grown.exit_code == 0);
  const json g = json::parse(grown.out);
  CHECK(g["run"]["expandable_segments"] == true);
  CHECK(g["memory"]["allocator"]["out_of_memory"] == false);
  // The same tensors: the same tensor peak; less held beyond it.
  CHECK(g["memory"]["tensor_peak_bytes"] == p["memory"]["tensor_peak_bytes"]);
  CHECK(g["memory"]["peak_bytes"].get<std::uint64_t>() < p["memory"]["peak_bytes"].get<std::uint64_t>());

  const plan_run text = run_plan(fragmented + " --expandable-segments --explain");
  CHECK_THAT(flowed(text.out), Catch::Contains("PyTorch's caching allocator with expandable segments, replayed over 3 steps"));
  CHECK_THAT(flowed(text.out), Catch::Contains("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (a segment of addresses a pool"));
}

TEST_CASE("the default allocator's report points at expandable segments, and the first suggestion is them", "[cli][expandable]") {
  const plan_run r = run_plan(fragmented);
  REQUIRE(r.exit_code == 1);
  CHECK_THAT(flowed(r.out), Catch::Contains("The tensors fit") && Catch::Contains("--expandable-segments replays it"));
  CHECK_THAT(r.out, Catch::Contains("  1. plan " + fragmented + " --expandable-segments\n"));
  const json j = json::parse(run_plan(fragmented + " --json").out);
  REQUIRE_FALSE(j["suggestions"].empty());
  CHECK(j["suggestions"][0]["changes"] == json::array({"--expandable-segments"}));
  CHECK(j["suggestions"][0]["cost"] == "same numerics");
  // Kept, the lever is not pulled.
  const json kept = json::parse(run_plan(fragmented + " --json --keep allocator").out);
  for (const json& s : kept["suggestions"])
    for (const json& change : s["changes"]) CHECK(change != "--expandable-segments");
}

TEST_CASE("expandable segments are noted where nothing replays them", "[cli][expandable]") {
  const plan_run llmc = run_plan("--model gpt2 --seq 1024 --framework llmc --gpu h100 --expandable-segments");
  CHECK_THAT(llmc.out, Catch::Contains("--expandable-segments has no effect under --framework llmc"));
  const plan_run hf = run_plan("--model gpt2 --seq 1024 --gpu h100 --expandable-segments");
  CHECK_THAT(hf.out, !Catch::Contains("has no effect"));
}

TEST_CASE("plan search --levers allocator searches both allocators", "[cli][expandable]") {
  const std::string search = "search --model tinyllama-1.1b --seq 512 --gpu h100 --json";
  const plan_run plain = run_plan(search), widened = run_plan(search + " --levers allocator");
  REQUIRE(plain.exit_code == 0);
  REQUIRE(widened.exit_code == 0);
  const json p = json::parse(plain.out), w = json::parse(widened.out);
  CHECK(w["evaluated"].get<int>() == 2 * p["evaluated"].get<int>());
  bool with = false, without = false;
  for (const json& row : w["best"]) (row["expandable_segments"] == true ? with : without) = true;
  CHECK(with);
  CHECK(without);
  for (const json& row : p["best"]) CHECK(row["expandable_segments"] == false);
}

TEST_CASE("the replay's known error is one segment of the loss's size, named in the report and the JSON", "[cli][allocator]") {
  // GPT-2 at b4 s1024: the loss's [4096, 50257] fp32 buffers are 823,410,688 bytes, a segment of 393 x 2 MiB.
  // The measured runs the replay missed by more than 3% (S5, and S10 before its softmax-backward buffer was
  // listed) and S11 were off by about one such segment.
  const std::string gpt2 = "--model gpt2 --seq 1024 --micro-batch 4 --dropout 0.1 --gpu h100";
  const json j = json::parse(run_plan(gpt2 + " --json").out);
  CHECK(j["memory"]["allocator"]["loss_segment_bytes"].get<std::uint64_t>() == 393ull * (2ull << 20));
  CHECK_THAT(flowed(run_plan(gpt2).out), Catch::Contains("Its known error: against PyTorch on an H100, its larger misses were about "
                                                 "one segment of the loss's [b*s, V] fp32 size; here 0.77 GiB") &&
                                     Catch::Contains("here 0.77 GiB"));
  // Not for the expandable allocator, which no measurement has checked yet: absent, and no line.
  CHECK_FALSE(json::parse(run_plan(gpt2 + " --expandable-segments --json").out)["memory"]["allocator"].contains("loss_segment_bytes"));
  CHECK(run_plan(gpt2 + " --expandable-segments").out.find("Its known error") == std::string::npos);
  // Llama-3.1-8B's 128,256-word vocabulary at b1 s8192: 3.91 GiB.
  CHECK(json::parse(run_plan("--model llama-3.1-8b --seq 8192 --micro-batch 1 --gpu h200 --json").out)["memory"]["allocator"]
            ["loss_segment_bytes"].get<std::uint64_t>() == 8192ull * 128256 * 4);
}

TEST_CASE("the report says what a run on an allocator edge reserves after another run in the same process", "[cli][allocator]") {
  // S5's configuration: 5.39 GiB in a process of its own, 4.65 GiB after S1 had made the cuBLAS workspaces
  // (tests/data/measurements/, the shared file: 4,991,221,760 bytes). The replay gives both.
  const std::string s5 = "--model gpt2 --seq 1024 --micro-batch 4 --precision amp-bf16 --dropout 0.1 --recompute full --gpu h100";
  const json j = json::parse(run_plan(s5 + " --json").out);
  const json& a = j["memory"]["allocator"];
  const std::uint64_t warm = a["reserved_after_another_run_bytes"].get<std::uint64_t>();
  CHECK(std::abs(static_cast<double>(warm) - 4991221760.0) < 0.005 * 4991221760.0);
  CHECK(j["memory"]["allocator_reserved_bytes"].get<std::uint64_t>() > warm + (700ull << 20));  // a loss segment apart
  CHECK_THAT(run_plan(s5).out, Catch::Contains("After another run in the same process") && Catch::Contains("4.65 GiB (-0.74 GiB)"));
  // S1's configuration sits on no such edge: within 1% either way (32 MiB: the forward's workspace, a segment of
  // its own when made before), and no line.
  const std::string s1 = "--model gpt2 --seq 1024 --micro-batch 4 --precision amp-bf16 --dropout 0.1 --gpu h100";
  const json j1 = json::parse(run_plan(s1 + " --json").out);
  const double own = j1["memory"]["allocator_reserved_bytes"].get<double>();
  CHECK(std::abs(j1["memory"]["allocator"]["reserved_after_another_run_bytes"].get<double>() - own) < 0.01 * own);
  CHECK(run_plan(s1).out.find("After another run") == std::string::npos);
  // Not replayed so with expandable segments (the workspaces stay out of that replay): absent.
  CHECK_FALSE(json::parse(run_plan(s1 + " --expandable-segments --json").out)["memory"]["allocator"].contains("reserved_after_another_run_bytes"));
}
