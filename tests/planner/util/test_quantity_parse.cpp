#include <catch2/catch.hpp>

#include "planner/util/input_error.hpp"
#include "planner/util/quantity_parse.hpp"

using namespace trainplan;

TEST_CASE("decimal counts take K/M/B/T suffixes exactly", "[parse]") {
  CHECK(parse_decimal_count("7B", "--params") == 7'000'000'000ull);
  CHECK(parse_decimal_count("1.5B", "--params") == 1'500'000'000ull);
  CHECK(parse_decimal_count("1.1b", "--params") == 1'100'000'000ull);
  CHECK(parse_decimal_count("124M", "--params") == 124'000'000ull);
  CHECK(parse_decimal_count("1T", "--tokens") == 1'000'000'000'000ull);
  CHECK(parse_decimal_count("405G", "--params") == 405'000'000'000ull);
  CHECK(parse_decimal_count("12345", "--params") == 12345ull);
}

TEST_CASE("decimal counts take scientific notation exactly", "[parse]") {
  CHECK(parse_decimal_count("7e9", "--params") == 7'000'000'000ull);
  CHECK(parse_decimal_count("1.5e9", "--params") == 1'500'000'000ull);
  CHECK(parse_decimal_count("1.5E12", "--tokens") == 1'500'000'000'000ull);
  CHECK(parse_decimal_count("405e9", "--params") == 405'000'000'000ull);
  CHECK(parse_decimal_count("0.1e20", "--tokens") == 10'000'000'000'000'000'000ull);  // 10^19 < 2^64
  CHECK(parse_decimal_count("1.8446744073709551615e19", "--tokens") == 18'446'744'073'709'551'615ull);
  CHECK(parse_decimal_count("12.5e1", "--params") == 125ull);
  for (const char* bad : {"1e", "1e+9", "1e-9", "1e9B", "e9", "1.55e1", "1e20", "2e19", "1e99999999999999999999", "0e5",
                          "1.8446744073709551616e19", "0.5e0"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_decimal_count(bad, "--params"), input_error);
  }
  CHECK_THROWS_WITH(parse_decimal_count("1e20", "--params"), Catch::Contains("64 bits"));
  CHECK_THROWS_WITH(parse_decimal_count("1.55e1", "--params"), Catch::Contains("whole number"));
  CHECK_THROWS_WITH(parse_decimal_count("1e9B", "--params"), Catch::Contains("exponent"));
}

TEST_CASE("binary counts take k/M as powers of 1024", "[parse]") {
  CHECK(parse_binary_count("4096", "--seq") == 4096);
  CHECK(parse_binary_count("4k", "--seq") == 4096);
  CHECK(parse_binary_count("32K", "--seq") == 32768);
  CHECK(parse_binary_count("1M", "--seq") == 1048576);
  CHECK(parse_binary_count("1.5k", "--seq") == 1536);
}

TEST_CASE("malformed numbers are input errors naming the option", "[parse]") {
  for (const char* bad : {"", "abc", "7X", "7BB", "-1", "1.5", "0", "0.1k", "1e9", " 7B", "7B ", "."}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_binary_count(bad, "--seq"), input_error);
  }
  for (const char* bad : {"", "B", "1.23456789012B0", "99999999999999999999", "20000000000T", "0B", "1.0000000001"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_decimal_count(bad, "--params"), input_error);
  }
  CHECK_THROWS_WITH(parse_decimal_count("7X", "--params"), Catch::Contains("--params") && Catch::Contains("7X"));
}

TEST_CASE("integers and probabilities are checked", "[parse]") {
  CHECK(parse_integer("32", "--layers") == 32);
  CHECK_THROWS_AS(parse_integer("0", "--layers"), input_error);
  CHECK_THROWS_AS(parse_integer("3.5", "--layers"), input_error);
  CHECK_THROWS_AS(parse_integer("18446744073709551616", "--layers"), input_error);
  CHECK(parse_probability("0.1", "--dropout") == Approx(0.1));
  CHECK(parse_probability("0", "--dropout") == 0.0);
  CHECK_THROWS_AS(parse_probability("1", "--dropout"), input_error);
  CHECK_THROWS_AS(parse_probability("-0.1", "--dropout"), input_error);
  CHECK_THROWS_AS(parse_probability("nan", "--dropout"), input_error);
  CHECK_THROWS_AS(parse_probability("0.1x", "--dropout"), input_error);
}

TEST_CASE("binary counts take G and T as 1024^3 and 1024^4, up to 2^64 - 1", "[parse]") {
  CHECK(parse_binary_count("512G", "--memory") == 512ull << 30);
  CHECK(parse_binary_count("1T", "--memory") == 1ull << 40);
  CHECK(parse_binary_count("1.5G", "--memory") == 3ull << 29);  // 1.5 x 2^30 = 3 x 2^29
  // (2^24 - 1) T = 2^64 - 2^40 fits; 2^24 T = 2^64 does not.
  CHECK(parse_binary_count("16777215T", "--memory") == (16777215ull << 40));
  CHECK_THROWS_WITH(parse_binary_count("16777216T", "--memory"), Catch::Contains("64 bits"));
  // 1.0001k = 1024.1024: not whole.
  CHECK_THROWS_WITH(parse_binary_count("1.0001k", "--seq"), Catch::Contains("whole number"));
  // Scientific notation is for parameter and token counts only.
  CHECK_THROWS_WITH(parse_binary_count("4e3", "--seq"), Catch::Contains("scientific notation"));
}

TEST_CASE("integers take the caller's minimum, and numbers in a range include both ends", "[parse]") {
  CHECK(parse_integer("0", "--experts", 0) == 0);
  CHECK(parse_integer("18446744073709551615", "--layers") == 18'446'744'073'709'551'615ull);
  CHECK_THROWS_WITH(parse_integer("1", "--ep", 2), Catch::Contains("--ep") && Catch::Contains("must be at least 2"));
  for (const char* bad : {"+5", "-1", " 5", "5 ", "0x10", ""}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_integer(bad, "--layers"), input_error);
  }
  CHECK(parse_number_in("1", "--capacity-factor", 1, 4) == 1.0);
  CHECK(parse_number_in("4", "--capacity-factor", 1, 4) == 4.0);
  CHECK(parse_number_in("1.25", "--capacity-factor", 1, 4) == 1.25);
  CHECK_THROWS_WITH(parse_number_in("4.0001", "--capacity-factor", 1, 4), Catch::Contains("must be from 1 to 4"));
  CHECK_THROWS_WITH(parse_number_in("0.999", "--capacity-factor", 1, 4), Catch::Contains("--capacity-factor"));
  for (const char* bad : {"inf", "nan", "1e400", "", "2x"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_number_in(bad, "--capacity-factor", 1, 4), Catch::Contains("is not a number"));
  }
}
