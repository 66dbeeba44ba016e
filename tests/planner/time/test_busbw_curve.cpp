// A measured NCCL sweep as a function of the message size (planner/time/busbw_curve.hpp): the measured points
// themselves, log-log interpolation between them worked by hand, the plateau above and constant time below.
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>

#include "planner/time/busbw_curve.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using trainplan::test::data;

namespace {

measured_point at(double bytes, double gbytes_per_s) { return {bytes, gbytes_per_s, std::nullopt, "test"}; }

}  // namespace

TEST_CASE("a measured size gives its measured bus bandwidth", "[busbw]") {
  // DGX H100's 8-GPU all-reduce table (data/clusters.json, dgx-h100 series[0]): 466.35 GB/s at 1 GiB, 0.07 at 1 KiB,
  // 478.87 at 8 GiB.
  const measured_series* sweep = data().cluster("dgx-h100").intra_sweep();
  REQUIRE(sweep != nullptr);
  CHECK(interpolated_bus_gbytes_per_s(sweep->points, 1024.0 * 1024 * 1024) == Approx(466.35));
  CHECK(interpolated_bus_gbytes_per_s(sweep->points, 1024) == Approx(0.07));
  CHECK(interpolated_bus_gbytes_per_s(sweep->points, 8.0 * 1024 * 1024 * 1024) == Approx(478.87));
}

TEST_CASE("between two sizes the bus bandwidth is straight in log-log", "[busbw]") {
  // (1 MiB, 10 GB/s) and (4 MiB, 40 GB/s): 2 MiB is halfway in log(size), so log(busbw) is halfway too:
  // exp((ln 10 + ln 40) / 2) = sqrt(400) = 20 GB/s. A quarter of the way (sqrt(2) MiB): 10 x 4^(1/4) = 14.142.
  const std::vector<measured_point> pts{at(4 << 20, 40), at(1 << 20, 10)};  // unsorted on purpose
  CHECK(interpolated_bus_gbytes_per_s(pts, 2 << 20) == Approx(20));
  CHECK(interpolated_bus_gbytes_per_s(pts, std::sqrt(2.0) * (1 << 20)) == Approx(10 * std::pow(4.0, 0.25)));
  // A falling stretch: (1 MiB, 40) to (4 MiB, 10): 20 at 2 MiB as well.
  const std::vector<measured_point> falling{at(1 << 20, 40), at(4 << 20, 10)};
  CHECK(interpolated_bus_gbytes_per_s(falling, 2 << 20) == Approx(20));
}

TEST_CASE("above the largest size the plateau holds, below the smallest the time does", "[busbw]") {
  const std::vector<measured_point> pts{at(1024, 0.5), at(1 << 30, 400)};
  CHECK(interpolated_bus_gbytes_per_s(pts, 1ull << 34) == Approx(400));
  // Below 1 KiB: the 1 KiB time, so busbw in proportion to the size: 256 B -> 0.5 x 256/1024 = 0.125 GB/s.
  CHECK(interpolated_bus_gbytes_per_s(pts, 256) == Approx(0.125));
  const double t_1k = 1024 / 0.5, t_256 = 256 / interpolated_bus_gbytes_per_s(pts, 256);
  CHECK(t_256 == Approx(t_1k));
}

TEST_CASE("a size measured faster than a smaller one takes the smaller one's time", "[busbw]") {
  // DGX H100's table (data/clusters.json dgx-h100 series[0]): 21.35 GB/s at 512 KiB, 43.7 at 1 MiB: 1 MiB in
  // 1 MiB x 1.75 / 43.7 GB/s = 42.0 us, less than 512 KiB's 43.0 us. A larger message is never faster: 1 MiB takes
  // 512 KiB's time, busbw 2 x 21.35 = 42.7 GB/s, and sizes between take it too.
  const std::vector<measured_point> pts{at(512 * 1024, 21.35), at(1 << 20, 43.7), at(2 << 20, 81.93)};
  CHECK(interpolated_bus_gbytes_per_s(pts, 1 << 20) == Approx(42.7));
  CHECK(interpolated_bus_gbytes_per_s(pts, 768 * 1024) == Approx(21.35 * 1.5));
  // 2 MiB stands (81.93 < 2 x 42.7): the time rises again.
  CHECK(interpolated_bus_gbytes_per_s(pts, 2 << 20) == Approx(81.93));
}

TEST_CASE("points measured at 0 GB/s carry no rate and are skipped, and none at all is an error", "[busbw]") {
  // nccl-tests prints busbw with two decimals: 8 B on 16 H100s reads 0.00 (data/clusters.json dgx-h100 series[1]).
  const std::vector<measured_point> pts{at(8, 0.0), at(16, 0.0), at(1024, 1.0), at(2048, 2.0)};
  CHECK(interpolated_bus_gbytes_per_s(pts, 512) == Approx(0.5));  // the 1 KiB point's time
  CHECK(interpolated_bus_gbytes_per_s(pts, 16) == Approx(1.0 * 16 / 1024));
  CHECK_THROWS_AS(interpolated_bus_gbytes_per_s({at(8, 0.0)}, 1024), std::invalid_argument);
  CHECK_THROWS_AS(interpolated_bus_gbytes_per_s({}, 1024), std::invalid_argument);
}
