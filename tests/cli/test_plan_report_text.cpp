// The fit check's text report (cli/plan_report_text.cpp): the answer first, lines a terminal holds, the
// suggestions as commands to paste, the assumptions short unless --explain.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_plan.hpp"

using namespace trainplan::test;
using json = nlohmann::json;

namespace {

std::size_t widest(const std::string& text) {
  std::size_t w = 0;
  for (const std::string& line : lines_of(text)) w = std::max(w, line.size());
  return w;
}

// The index of the first line starting with `prefix`, or the line count.
std::size_t line_starting(const std::vector<std::string>& lines, const std::string& prefix) {
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (lines[i].starts_with(prefix)) return i;
  return lines.size();
}

}  // namespace

TEST_CASE("the report gives the verdict and the peak in its first lines, then memory, suggestions, assumptions", "[cli][report]") {
  const plan_run r = run_plan("--params 7B --seq 4096 --gpu h100");
  REQUIRE(r.exit_code == 1);
  const std::vector<std::string> lines = lines_of(r.out);
  const json j = json::parse(run_plan("--params 7B --seq 4096 --gpu h100 --json").out);
  const std::size_t verdict = line_starting(lines, "Verdict: DOES NOT FIT");
  REQUIRE(verdict < 5);
  // The peak on the verdict's line is the JSON's peak_bytes, in GiB as the report writes it.
  const double peak_gib = j["memory"]["peak_bytes"].get<double>() / (1024.0 * 1024 * 1024);
  CHECK_THAT(lines[verdict], Catch::Contains(fmt::format("peak {:.2f} GiB", peak_gib)));
  const std::size_t memory = line_starting(lines, "Memory at the peak");
  const std::size_t ways = line_starting(lines, "What would make it fit");
  const std::size_t assumptions = line_starting(lines, "Assumptions");
  CHECK(verdict < memory);
  CHECK(memory < ways);
  CHECK(ways < assumptions);
  REQUIRE(assumptions < lines.size());
  // The assumptions in a few short lines, each one line; the full account on request.
  CHECK(lines.size() - assumptions <= 6);
  CHECK_THAT(lines[assumptions], Catch::Contains("--explain"));
}

TEST_CASE("no line of the report is wider than 100 columns, with --explain too", "[cli][report]") {
  for (const std::string args : {"--params 7B --seq 4096 --gpu h100", "--params 7B --seq 4096 --gpu h100 --explain",
                                 "--params 70B --seq 4096 --gpu h100 --gpus 8 --framework fsdp2 --explain",
                                 "--params 7B --seq 4096 --gpu h100 --framework megatron --tp 2 --pp 2 --gpus 8 --explain",
                                 "--model tinyllama-1.1b --seq 512 --micro-batch 47 --gpu h100 --explain",
                                 "--model deepseek-v3 --seq 4096 --gpu h100 --gpus 256 --ep 64 --zero 3 --recompute full"}) {
    INFO("plan " << args);
    const plan_run r = run_plan(args);
    REQUIRE((r.exit_code == 0 || r.exit_code == 1));
    CHECK(widest(r.out) <= 100);
  }
}

TEST_CASE("option --explain prints the full assumptions, the same as the JSON's", "[cli][report]") {
  const std::string run = "--params 7B --seq 4096 --gpu h100 --suggestions 0";
  const std::string brief = run_plan(run).out, full = run_plan(run + " --explain").out;
  const json j = json::parse(run_plan(run + " --json").out);
  CHECK(full.size() > brief.size());
  CHECK_THAT(full, Catch::Contains("Assumptions:\n"));
  // Each full assumption's first words begin a bullet of --explain's report (the rest may wrap).
  for (const json& a : j["assumptions"]) {
    const std::string words = a.get<std::string>().substr(0, 40);
    CHECK_THAT(full, Catch::Contains("  - " + words));
  }
  CHECK_THAT(brief, !Catch::Contains("  - " + j["assumptions"].back().get<std::string>().substr(0, 60)));
}

TEST_CASE("a suggestion prints the whole command, its options merged into the one given", "[cli][report]") {
  // --micro-batch 2 given: a suggestion that changes the micro-batch replaces it in place, not a second one after.
  const std::string given = "--params 7B --seq 4096 --micro-batch 2 --gpu h100";
  const plan_run r = run_plan(given);
  REQUIRE(r.exit_code == 1);
  const json j = json::parse(run_plan(given + " --json").out);
  REQUIRE_FALSE(j["suggestions"].empty());
  bool merged_batch = false;
  for (const json& s : j["suggestions"]) {
    const std::string command = s["command"];
    INFO(command);
    CHECK(command.starts_with("plan --params 7B --seq 4096 --micro-batch "));
    // Each option once.
    for (const std::string option : {"--params", "--seq", "--micro-batch", "--gpu ", "--grad-accum", "--gpus", "--zero"}) {
      const std::size_t first = command.find(option);
      CHECK((first == std::string::npos || command.find(option, first + 1) == std::string::npos));
    }
    for (const json& c : s["changes"]) CHECK_THAT(command, Catch::Contains(c.get<std::string>().substr(0, c.get<std::string>().find(' '))));
    if (s["changes"][0].get<std::string>().starts_with("--micro-batch")) merged_batch = true;
    // The text report prints it (wrapped with backslashes where long), without the --json it was given here.
    std::string in_text = command;
    REQUIRE(in_text.find(" --json") != std::string::npos);
    in_text.erase(in_text.find(" --json"), 7);
    CHECK_THAT(flowed(r.out), Catch::Contains(in_text));
  }
  CHECK(merged_batch);
  // Run as printed, the first gives the peak it promised.
  const json& first = j["suggestions"][0];
  const json again = json::parse(run_plan(first["command"].get<std::string>().substr(5) + " --json").out);
  CHECK(again["memory"]["peak_bytes"] == first["peak_bytes"]);
  CHECK(again["fits"] == true);
}

TEST_CASE("every suggestion of ten runs that do not fit, run as printed, fits with the peak it printed", "[cli][report][suggest]") {
  // One GPU and several, five stacks, fine-tuning and pretraining: each suggestion's command is the whole run
  // (the changes merged into the options given), so pasted as printed it must be a plan that fits, at the peak
  // the suggestion promised.
  const char* runs[] = {
      "--params 7B --seq 4096 --gpu h100",
      "--model llama-3.1-8b --seq 4096 --gpu rtx-4090 --finetune lora",
      "--model llama-2-13b --seq 4096 --gpu a100-40gb",
      "--model gpt2-xl --seq 1024 --micro-batch 16 --gpu t4 --precision amp-fp16",
      "--model llama-3.1-70b --seq 4096 --gpus 64",
      "--model llama-3.1-70b --seq 4096 --gpus 16 --framework megatron --tp 8",
      "--model mixtral-8x7b --seq 4096 --gpus 8",
      "--model llama-3.1-8b --seq 8192 --gpu a100-80gb",
      "--model llama-3.1-8b --seq 4096 --gpus 2 --gpu l4 --framework fsdp2",
      "--model llama-2-13b --seq 4096 --gpus 4 --gpu a10g --framework deepspeed",
  };
  std::size_t checked = 0;
  for (const char* run : runs) {
    INFO(run);
    const plan_run given = run_plan(std::string(run) + " --json");
    REQUIRE(given.exit_code == 1);
    const json j = json::parse(given.out);
    REQUIRE_FALSE(j["suggestions"].empty());
    for (const json& s : j["suggestions"]) {
      const std::string command = s["command"];
      INFO(command);
      REQUIRE(command.starts_with("plan "));
      const plan_run again = run_plan(command.substr(5));
      REQUIRE(again.exit_code == 0);
      const json plan = json::parse(again.out);
      CHECK(plan["fits"] == true);
      CHECK(plan["memory"]["peak_bytes"] == s["peak_bytes"]);
      ++checked;
    }
  }
  CHECK(checked >= 20);
}

TEST_CASE("a long sequence whose fp32 logits alone fill the GPU is offered the loss in pieces", "[cli][report][suggest][loss]") {
  // Llama-3.1-8B at 32,768 tokens: the fp32 logits are 32,768 x 128,256 x 4 bytes = 15.66 GiB, and the
  // cross-entropy's log-softmax and gradient as many again, beside 104 GiB of weights and AdamW state on an
  // 80 GB H100. What fits keeps the logits out: a chunked or fused linear cross-entropy.
  const plan_run given = run_plan("--model llama-3.1-8b --seq 32768 --gpu h100 --json");
  REQUIRE(given.exit_code == 1);
  const json j = json::parse(given.out);
  REQUIRE_FALSE(j["suggestions"].empty());
  bool offered = false;
  for (const json& s : j["suggestions"]) {
    const std::string command = s["command"];
    if (command.find("--loss ") == std::string::npos) continue;
    offered = true;
    INFO(command);
    const plan_run again = run_plan(command.substr(5) + " --json");
    REQUIRE(again.exit_code == 0);
    CHECK(json::parse(again.out)["memory"]["peak_bytes"] == s["peak_bytes"]);
  }
  CHECK(offered);
}
