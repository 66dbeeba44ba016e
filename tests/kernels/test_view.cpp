#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "kernels/view.hpp"

using namespace trainplan::kernels;

TEST_CASE("bf16 rounds to nearest, ties to even", "[kernels][dtype]") {
  CHECK(bf16_to_float(float_to_bf16(1.0f)) == 1.0f);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  CHECK(bf16_to_float(float_to_bf16(1.0f + 0x1p-8f)) == 1.0f);
  // 1 + 3*2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): rounds up.
  CHECK(bf16_to_float(float_to_bf16(1.0f + 3 * 0x1p-8f)) == 1.0f + 0x1p-6f);
  CHECK(bf16_to_float(float_to_bf16(1.0f + 0x1p-8f + 0x1p-12f)) == 1.0f + 0x1p-7f);  // above halfway
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isinf(bf16_to_float(float_to_bf16(std::numeric_limits<float>::infinity()))));
  CHECK(bf16_to_float(float_to_bf16(-2.5f)) == -2.5f);
}

TEST_CASE("fp16 rounds to nearest even with subnormals and overflow", "[kernels][dtype]") {
  CHECK(fp16_to_float(float_to_fp16(1.0f)) == 1.0f);
  CHECK(fp16_to_float(float_to_fp16(65504.0f)) == 65504.0f);            // largest finite
  CHECK(std::isinf(fp16_to_float(float_to_fp16(65520.0f))));           // halfway to 2^16: ties up to inf
  CHECK(fp16_to_float(float_to_fp16(65519.0f)) == 65504.0f);
  CHECK(fp16_to_float(float_to_fp16(1.0f + 0x1p-11f)) == 1.0f);          // tie, even
  CHECK(fp16_to_float(float_to_fp16(1.0f + 3 * 0x1p-11f)) == 1.0f + 0x1p-9f);  // tie, odd: up
  CHECK(fp16_to_float(float_to_fp16(0x1p-24f)) == 0x1p-24f);             // smallest subnormal
  CHECK(fp16_to_float(float_to_fp16(0x1p-25f)) == 0.0f);                 // tie between 0 and 2^-24: even (0)
  CHECK(fp16_to_float(float_to_fp16(3 * 0x1p-25f)) == 0x1p-23f);         // tie between 1 and 2 steps: even (2)
  CHECK(fp16_to_float(float_to_fp16(0x1p-14f)) == 0x1p-14f);             // smallest normal
  CHECK(fp16_to_float(float_to_fp16(-3.0f)) == -3.0f);
  CHECK(std::isnan(fp16_to_float(float_to_fp16(std::numeric_limits<float>::quiet_NaN()))));
  // Every fp16 value survives a round trip.
  for (std::uint32_t h = 0; h < 0x7c00u; ++h) {
    const auto v = static_cast<std::uint16_t>(h);
    REQUIRE(float_to_fp16(fp16_to_float(v)) == v);
  }
}

TEST_CASE("a view stores in its dtype's bytes", "[kernels][dtype]") {
  std::uint16_t storage[2] = {0, 0};
  view v{storage, trainplan::dtype::bf16, 2};
  v.set(1, 3.14159f);
  CHECK(storage[0] == 0);
  CHECK(v.get(1) == bf16_to_float(float_to_bf16(3.14159f)));
  CHECK(v.get(1) != 3.14159f);
}
