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
  CHECK(doc["run"]["compile_scope"] == "model");  // a bare --compile: the whole model
  const plan_run eager = run_plan("--model llama-3.2-3b --seq 4096 --micro-batch 2 --gpu h100 --precision bf16 --json");
  REQUIRE(eager.exit_code == 0);
  const nlohmann::json eager_doc = nlohmann::json::parse(eager.out);
  CHECK_FALSE(eager_doc["run"].contains("compile"));
  // The compiled layers save less than eager ones.
  CHECK(doc["memory"]["peak_bytes"].get<double>() < eager_doc["memory"]["peak_bytes"].get<double>());
}

TEST_CASE("compile is refused outside hf and torchtune and where its layers are not modelled", "[cli][compile]") {
  expect_refused("--model llama-3.2-3b --seq 2048 --framework megatron --compile", {"--compile", "megatron"});
  expect_refused("--model llama-3.2-3b --seq 2048 --framework fsdp2 --gpus 8 --compile", {"--compile", "fsdp2"});
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

TEST_CASE("compile takes a scope: the whole model, each layer, or each layer and the loss", "[cli][compile]") {
  const std::string run = "--model llama-3.2-3b --seq 4096 --micro-batch 2 --gpu h100 --precision bf16 --json --compile";
  double peak_bytes[3] = {};
  const char* scopes[] = {"model", "layers", "layers+loss"};
  for (int i = 0; i < 3; ++i) {
    const plan_run r = run_plan(run + "=" + scopes[i]);
    INFO(scopes[i] << ": " << r.err);
    REQUIRE(r.exit_code == 0);
    const nlohmann::json doc = nlohmann::json::parse(r.out);
    CHECK(doc["run"]["compile_scope"] == scopes[i]);
    peak_bytes[i] = doc["memory"]["tensor_peak_bytes"].get<double>();
  }
  // (The scopes' own rows are derived in tests/planner/profiles/hf/test_hf_compile.cpp.) A compiled loss, with the
  // whole model or apart, saves transformers' bf16 logits and their logsumexp alike; an eager loss keeps more.
  CHECK(peak_bytes[0] == peak_bytes[2]);
  CHECK(peak_bytes[2] < peak_bytes[1]);
  // As a separate word too, and the report says which.
  const plan_run spaced = run_plan("--model llama-3.2-3b --seq 4096 --micro-batch 2 --gpu h100 --precision bf16 --compile layers --explain");
  REQUIRE(spaced.exit_code == 0);
  CHECK_THAT(flowed(spaced.out), Catch::Contains("--compile layers) of each decoder layer apart"));
  expect_refused("--model llama-3.2-3b --seq 2048 --precision bf16 --compile layer", {"--compile", "layers"});
}

TEST_CASE("compile scopes without a config key are said on stderr by --emit", "[cli][compile]") {
  const auto dir = trainplan::test::scratch_dir("trainplan-emit-compile-scope");
  const std::string run = "--model llama-3.2-3b --seq 2048 --micro-batch 1 --gpu h100 --precision amp-bf16 ";
  const plan_run layers = run_plan(run + "--compile layers --emit hf-trainer -o " + (dir / "layers.json").string());
  REQUIRE(layers.exit_code == 0);
  CHECK_THAT(flowed(layers.err), Catch::Contains("use_regional_compilation"));
  std::ifstream written(dir / "layers.json");
  CHECK_FALSE(nlohmann::json::parse(written).contains("torch_compile"));  // torch_compile would compile the whole model
}
