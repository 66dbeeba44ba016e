#pragma once
// The bad-input contract checked in one place: exit 2 and one line on stderr naming the problem.
#include <catch2/catch.hpp>
#include <initializer_list>
#include <string>

#include "tests/cli/run_plan.hpp"

namespace trainplan::test {

// Runs plan and expects the one-line refusal with exit 2, its message containing every one of `names`.
inline void expect_refused(const std::string& args, std::initializer_list<std::string> names = {}) {
  INFO("plan " << args);
  const plan_run r = run_plan(args);
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(one_line(r.err));
  for (const std::string& name : names) CHECK_THAT(r.err, Catch::Contains(name));
}

}  // namespace trainplan::test
