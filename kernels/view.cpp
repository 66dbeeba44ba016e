// The dtype conversions behind view (view.hpp) that are not inline: fp32 to fp16 and back with
// round-to-nearest-even, subnormals and overflow to inf, and rounding a value to a buffer's dtype.
#include "kernels/view.hpp"

#include <cmath>

namespace trainplan::kernels {

std::uint16_t float_to_fp16(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN
  if (x >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504: inf
  if (x < 0x38800000u) {  // below the smallest normal 2^-14: subnormal or zero
    // value = x as float; subnormal step is 2^-24. nearbyint rounds half to even in the default mode.
    float magnitude;
    std::memcpy(&magnitude, &x, 4);
    const auto steps = static_cast<std::uint32_t>(std::nearbyint(magnitude * 16777216.0f));
    return static_cast<std::uint16_t>(sign | steps);  // steps == 1024 becomes the smallest normal: correct
  }
  // Normal: rebias the exponent (127 -> 15) and round the 23-bit mantissa to 10 bits, ties to even.
  const std::uint32_t rebias = x - 0x38000000u;
  const std::uint32_t rounded = rebias + 0x0fffu + ((rebias >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

float fp16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  float f;
  if (exponent == 0) {
    f = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -f : f;
  }
  std::uint32_t bits;
  if (exponent == 31) bits = sign | 0x7f800000u | (mantissa << 13);
  else bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  std::memcpy(&f, &bits, 4);
  return f;
}

float round_to(dtype t, float v) {
  switch (t) {
    case dtype::bf16: return bf16_to_float(float_to_bf16(v));
    case dtype::fp16: return fp16_to_float(float_to_fp16(v));
    default: return v;
  }
}

}  // namespace trainplan::kernels
