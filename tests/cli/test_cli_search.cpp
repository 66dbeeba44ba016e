// plan search's contract with scripts: bad input exits 2 with plan's own message, --top is at least 1.
#include <catch2/catch.hpp>

#include "tests/cli/run_plan.hpp"

using namespace trainplan::test;

TEST_CASE("plan search: a run plan refuses is bad input (exit 2, plan's message), not nothing fits", "[cli][search]") {
  // Experts that do not split over the GPUs, a sequence beyond GPT-2's learned positions: plan exits 2 for both.
  for (const std::string args : {"--model mixtral-8x7b --ep 3 --gpus 6", "--model gpt2 --seq 1025"}) {
    INFO(args);
    const plan_run planned = run_plan(args);
    const plan_run searched = run_plan("search " + args);
    CHECK(planned.exit_code == 2);
    CHECK(searched.exit_code == 2);
    CHECK(searched.err == planned.err);
  }
}

TEST_CASE("plan search: --top takes a whole number of at least 1", "[cli][search]") {
  for (const std::string bad : {"-1", "0", "18446744073709551616", "0x10", " 5", "2.5"}) {
    INFO(bad);
    CHECK(run_plan("search --model gpt2 --seq 1024 --top '" + bad + "'").exit_code == 2);
  }
  CHECK(run_plan("search --model gpt2 --seq 1024 --top 1").exit_code == 0);
}
