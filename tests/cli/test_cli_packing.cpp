// --packing on the command line: the report states the assumption, the JSON names it, and a run or a stack
// that cannot take it is refused in one line naming the option.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tests/cli/expect_refused.hpp"
#include "tests/cli/run_plan.hpp"

using namespace trainplan::test;

TEST_CASE("plan states the packing assumption and names it in its JSON", "[cli][packing]") {
  const plan_run brief = run_plan("--model llama-3.2-3b --seq 4096 --precision bf16 --attention flash_attention_2 --packing 1024");
  INFO(brief.err);
  REQUIRE(brief.exit_code == 0);
  CHECK_THAT(flowed(brief.out), Catch::Contains("packed documents of 1024 tokens (unmeasured"));
  const plan_run r = run_plan("--model llama-3.2-3b --seq 4096 --precision bf16 --attention flash_attention_2 --packing 1024 --explain");
  REQUIRE(r.exit_code == 0);
  const std::string out = flowed(r.out);
  CHECK_THAT(out, Catch::Contains("4 documents of 1024 tokens"));
  // Four documents of 1024 in a row of 4096: a quarter of the row's attention (4 x 1024^2 = 4096^2 / 4).
  CHECK_THAT(out, Catch::Contains("25.0% of the unpacked rows' attention FLOPs"));
  CHECK_THAT(out, Catch::Contains("not yet checked against a measurement"));
  const plan_run j = run_plan("--model llama-3.2-3b --seq 4096 --precision bf16 --packing 1024 --json");
  REQUIRE(j.exit_code == 0);
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  CHECK(doc["run"]["packing_doc_tokens"] == 1024);
  const plan_run unpacked = run_plan("--model llama-3.2-3b --seq 4096 --precision bf16 --json");
  REQUIRE(unpacked.exit_code == 0);
  CHECK_FALSE(nlohmann::json::parse(unpacked.out)["run"].contains("packing_doc_tokens"));
}

TEST_CASE("packing is refused with eager attention, outside transformers' stacks and when malformed", "[cli][packing]") {
  expect_refused("--model llama-3.2-3b --seq 4096 --precision bf16 --attention eager --packing 1024", {"--packing", "eager"});
  expect_refused("--model llama-3.2-3b --seq 2048 --framework megatron --packing 512", {"--packing", "megatron"});
  expect_refused("--model gpt2 --seq 1024 --framework llmc --dropout 0 --packing 256", {"--packing", "llmc"});
  expect_refused("--model llama-3.2-3b --seq 4096 --packing 0", {"--packing"});
  expect_refused("--model llama-3.2-3b --seq 4096 --packing many", {"--packing"});
}
