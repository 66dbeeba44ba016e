// The medians of the fits and checks (planner/measure/median.hpp), against numbers worked out by hand.
#include <catch2/catch.hpp>

#include "planner/measure/median.hpp"
#include "planner/util/input_error.hpp"

using namespace trainplan;

TEST_CASE("summarize_errors: the largest |error| and the median of |errors|, an even count's the mean of the middle two",
          "[median]") {
  // |3, -1, 2, -4| = 1, 2, 3, 4: largest 4, median (2 + 3) / 2 = 2.5.
  error_summary s = summarize_errors({3, -1, 2, -4});
  CHECK(s.max_pct == 4);
  CHECK(s.median_pct == 2.5);
  // |-7, 0.5, 2| = 0.5, 2, 7: largest 7, median 2.
  s = summarize_errors({-7, 0.5, 2});
  CHECK(s.max_pct == 7);
  CHECK(s.median_pct == 2);
  s = summarize_errors({-1.25});
  CHECK(s.max_pct == 1.25);
  CHECK(s.median_pct == 1.25);
  CHECK_THROWS_AS(summarize_errors({}), input_error);
}

TEST_CASE("upper_median: one of the values, the upper middle one of an even count", "[median]") {
  CHECK(upper_median({500, 300, 400}) == 400);
  CHECK(upper_median({5, 1, 3, 2}) == 3);  // 1, 2, 3, 5: the upper of 2 and 3
  CHECK(upper_median({7}) == 7);
  CHECK(upper_median({~0ull, 1}) == ~0ull);  // no sum of the two that could overflow
  CHECK_THROWS_AS(upper_median({}), input_error);
}
