// --framework torchtune on the command line: its defaults (bf16, a bare --compile meaning its own compile of each
// layer and the loss), the report's assumptions, and its refusals in one line naming the option.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tests/cli/expect_refused.hpp"
#include "tests/cli/run_plan.hpp"

using namespace trainplan::test;

TEST_CASE("torchtune plans in bf16 by default and compiles each layer and the loss", "[cli][torchtune]") {
  const std::string run = "--model llama-3.2-3b --seq 4096 --micro-batch 2 --gpu h100 --framework torchtune";
  const plan_run eager = run_plan(run + " --json");
  INFO(eager.err);
  REQUIRE(eager.exit_code == 0);
  const nlohmann::json e = nlohmann::json::parse(eager.out);
  CHECK(e["run"]["precision"] == "bf16");
  CHECK(e["run"]["framework"] == "torchtune");
  const plan_run compiled = run_plan(run + " --compile --json");
  INFO(compiled.err);
  REQUIRE(compiled.exit_code == 0);
  const nlohmann::json c = nlohmann::json::parse(compiled.out);
  CHECK(c["run"]["compile_scope"] == "layers+loss");
  CHECK(c["memory"]["tensor_peak_bytes"].get<double>() < e["memory"]["tensor_peak_bytes"].get<double>());
  // The report says what differs from transformers' modules.
  const plan_run text = run_plan(run + " --explain");
  REQUIRE(text.exit_code == 0);
  CHECK_THAT(flowed(text.out), Catch::Contains("k and v expanded to every query head"));
  CHECK_THAT(flowed(text.out), Catch::Contains("fp32 logits"));
}

TEST_CASE("torchtune refuses what its single-device recipe does not run", "[cli][torchtune]") {
  const std::string run = "--model llama-3.2-3b --seq 2048 --framework torchtune ";
  expect_refused(run + "--compile model", {"--compile model", "--compile layers+loss"});
  expect_refused(run + "--finetune lora", {"torchtune", "LoRA"});
  expect_refused(run + "--gpus 8", {"torchtune", "one GPU", "models it"});
  expect_refused(run + "--precision amp-bf16", {"--precision", "bf16"});
  expect_refused(run + "--attention eager", {"--attention"});
  expect_refused("--model gpt2 --seq 1024 --framework torchtune", {"torchtune", "gpt2"});
}
