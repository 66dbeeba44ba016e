// --framework torchtune on the command line: its defaults (bf16, a bare --compile meaning its own compile of each
// layer and the loss), the report's assumptions, its refusals in one line naming the option, and --emit torchtune.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/expect_refused.hpp"
#include "tests/cli/run_plan.hpp"
#include "tests/support/scratch_dir.hpp"

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

TEST_CASE("emit torchtune writes the recipe's keys the plan decided", "[cli][torchtune][emit]") {
  const auto dir = scratch_dir("trainplan-emit-torchtune");
  const std::string file = (dir / "overrides.yaml").string();
  const plan_run r = run_plan("--model llama-3.2-3b --seq 4096 --micro-batch 2 --gpu h100 --framework torchtune --compile "
                              "--loss chunked --loss-chunks 16 --recompute full --optimizer-impl fused --grad-accum 4 "
                              "--emit torchtune -o " + file);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* line : {"batch_size: 2\n", "gradient_accumulation_steps: 4\n", "  max_seq_len: 4096\n", "dtype: bf16\n",
                           "compile: True\n", "enable_activation_checkpointing: True\n", "optimizer_in_bwd: False\n",
                           "  _component_: torch.optim.AdamW\n", "  fused: True\n",
                           "  _component_: torchtune.modules.loss.CEWithChunkedOutputLoss\n", "  num_output_chunks: 16\n",
                           "  packed: False\n"}) {
    INFO(line);
    CHECK(text.find(line) != std::string::npos);
  }
  CHECK_THAT(r.err, Catch::Contains("SET_ME"));
  // A plan of transformers' modules is not torchtune's run: refused rather than written.
  expect_refused("--model llama-3.2-3b --seq 4096 --emit torchtune -o " + (dir / "hf.yaml").string(),
                 {"--emit torchtune", "--framework torchtune"});
  expect_refused("--model llama-3.2-3b --seq 4096 --framework torchtune --optimizer lion --emit torchtune -o " +
                     (dir / "lion.yaml").string(),
                 {"--emit torchtune", "lion"});
}
