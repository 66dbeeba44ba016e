// --compile on the command line: the report states that the compiled prediction is derived and unmeasured, the
// JSON names it, and a stack or layer that cannot take it is refused in one line naming the option.
#include <catch2/catch.hpp>

#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/cli/expect_refused.hpp"
#include "tests/cli/run_plan.hpp"
#include "tests/support/scratch_dir.hpp"

using namespace trainplan::test;

TEST_CASE("plan states the compile assumption and names it in its JSON", "[cli][compile]") {
  const plan_run brief = run_plan("--model llama-3.2-3b --seq 4096 --micro-batch 2 --gpu h100 --precision bf16 --compile");
  INFO(brief.err);
  REQUIRE(brief.exit_code == 0);
  CHECK_THAT(flowed(brief.out), Catch::Contains("torch.compile (unmeasured"));
  CHECK_THAT(flowed(brief.out), Catch::Contains("PyTorch under torch.compile + Hugging Face transformers"));
  CHECK_THAT(flowed(brief.out), !Catch::Contains("PyTorch eager"));
  const plan_run r = run_plan("--model llama-3.2-3b --seq 4096 --micro-batch 2 --gpu h100 --precision bf16 --compile --explain");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(flowed(r.out), Catch::Contains("derived from its min-cut partitioner's rules and unchecked"));
  const plan_run j = run_plan("--model llama-3.2-3b --seq 4096 --micro-batch 2 --gpu h100 --precision bf16 --compile --json");
  REQUIRE(j.exit_code == 0);
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  CHECK(doc["run"]["compile"] == true);
  const plan_run eager = run_plan("--model llama-3.2-3b --seq 4096 --micro-batch 2 --gpu h100 --precision bf16 --json");
  REQUIRE(eager.exit_code == 0);
  const nlohmann::json eager_doc = nlohmann::json::parse(eager.out);
  CHECK_FALSE(eager_doc["run"].contains("compile"));
  // The compiled layers save less than eager ones.
  CHECK(doc["memory"]["peak_bytes"].get<double>() < eager_doc["memory"]["peak_bytes"].get<double>());
}

TEST_CASE("compile is refused outside hf and where its layers are not modelled", "[cli][compile]") {
  expect_refused("--model llama-3.2-3b --seq 2048 --framework megatron --compile", {"--compile", "megatron"});
  expect_refused("--model gpt2 --seq 1024 --framework llmc --dropout 0 --compile", {"--compile", "llmc"});
  expect_refused("--model llama-3.2-3b --seq 2048 --precision fp32 --compile", {"--compile", "fp32"});
  expect_refused("--model gpt2 --seq 1024 --precision bf16 --compile", {"--compile", "GPT-2"});
}

TEST_CASE("compile is written as the Trainer's torch_compile by --emit hf-trainer", "[cli][compile]") {
  const auto dir = trainplan::test::scratch_dir("trainplan-emit-compile");
  const std::string run = "--model llama-3.2-3b --seq 2048 --micro-batch 1 --gpu h100 --precision amp-bf16 ";
  REQUIRE(run_plan(run + "--compile --emit hf-trainer -o " + (dir / "compiled.json").string()).exit_code == 0);
  REQUIRE(run_plan(run + "--emit hf-trainer -o " + (dir / "eager.json").string()).exit_code == 0);
  std::ifstream compiled(dir / "compiled.json"), eager(dir / "eager.json");
  const nlohmann::json c = nlohmann::json::parse(compiled), e = nlohmann::json::parse(eager);
  CHECK(c["torch_compile"] == true);
  CHECK_FALSE(e.contains("torch_compile"));
}
