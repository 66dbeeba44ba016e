// --loss, --loss-chunks and --attention flash_attention_2 on the command line: the report names them, and a
// stack or a run that cannot take them is refused in one line naming the option.
#include <catch2/catch.hpp>

#include "tests/cli/expect_refused.hpp"
#include "tests/cli/run_plan.hpp"

using namespace trainplan::test;

TEST_CASE("plan names the chunked loss and its chunks", "[cli][loss]") {
  const plan_run r = run_plan("--model llama-3.2-3b --seq 4096 --micro-batch 2 --precision bf16 --loss chunked --explain");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("loss chunked"));
  // torchtune's default: 8 chunks of 512 positions, 1,024 tokens each.
  CHECK_THAT(r.out, Catch::Contains("CEWithChunkedOutputLoss in 8 chunks"));
  const plan_run fused = run_plan("--model llama-3.2-3b --seq 4096 --micro-batch 2 --precision bf16 --loss fused-linear --explain");
  REQUIRE(fused.exit_code == 0);
  CHECK_THAT(fused.out, Catch::Contains("32 chunks of 256 tokens"));
}

TEST_CASE("the losses and flash_attention_2 are refused where they cannot run", "[cli][loss]") {
  expect_refused("--model gpt2 --seq 1024 --framework llmc --dropout 0 --loss chunked", {"--loss chunked", "--framework llmc"});
  expect_refused("--model llama-3.2-3b --seq 2048 --framework megatron --loss fused-linear", {"--loss fused-linear", "megatron"});
  expect_refused("--model gpt2 --seq 1024 --framework trainplan --dropout 0 --attention flash_attention_2",
                 {"flash_attention_2", "trainplan"});
  expect_refused("--model llama-3.2-3b --seq 2048 --loss-chunks 4", {"--loss-chunks", "--loss chunked"});
  expect_refused("--model llama-3.2-3b --seq 16 --loss chunked --loss-chunks 32", {"--loss-chunks 32", "--seq 16"});
  expect_refused("--model llama-3.2-3b --seq 2048 --loss chunked --loss-chunks 0", {"--loss-chunks"});
  expect_refused("--model llama-3.2-3b --seq 2048 --loss chunky", {"--loss", "chunky"});
  expect_refused("--model llama-3.2-3b --seq 2048 --precision fp32 --attention flash_attention_2", {"flash_attention_2", "fp32"});
}
