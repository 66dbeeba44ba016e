// The collectives' names and nccl-tests' bus-bandwidth factors (planner/system/collective.hpp).
#include <catch2/catch.hpp>

#include "planner/system/collective.hpp"
#include "planner/util/input_error.hpp"

using namespace trainplan;

TEST_CASE("bus factors are nccl-tests' documented ones", "[collective]") {
  // NVIDIA/nccl-tests doc/PERFORMANCE.md: all-reduce busbw = algbw x 2(n-1)/n; all-gather and reduce-scatter
  // (n-1)/n; alltoall (n-1)/n; a send/recv moves the message once.
  CHECK(bus_factor(collective::all_reduce, 8) == Approx(2.0 * 7 / 8));  // 1.75
  CHECK(bus_factor(collective::all_reduce, 2) == Approx(1.0));
  CHECK(bus_factor(collective::all_gather, 8) == Approx(7.0 / 8));
  CHECK(bus_factor(collective::reduce_scatter, 16) == Approx(15.0 / 16));
  CHECK(bus_factor(collective::all_to_all, 4) == Approx(3.0 / 4));
  CHECK(bus_factor(collective::send_recv, 2) == 1);
  // One rank moves nothing.
  for (collective c : {collective::all_reduce, collective::all_gather, collective::reduce_scatter, collective::all_to_all,
                       collective::send_recv})
    CHECK(bus_factor(c, 1) == 0);
}

TEST_CASE("collective names round-trip and an unknown one is refused naming where", "[collective]") {
  for (collective c : {collective::all_reduce, collective::all_gather, collective::reduce_scatter, collective::all_to_all,
                       collective::send_recv})
    CHECK(parse_collective(collective_name(c), "test") == c);
  CHECK(parse_collective("All_Reduce", "test") == collective::all_reduce);
  CHECK_THROWS_WITH(parse_collective("allreduce", "clusters.json: clusters[0].series[2]"),
                    Catch::Contains("clusters.json: clusters[0].series[2]") && Catch::Contains("all_reduce"));
}
