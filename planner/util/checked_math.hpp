#pragma once
// Exact 64-bit byte and element arithmetic. A 405B model at 1M tokens is still far inside 2^64 bytes, but
// a user can ask for a micro-batch of 10^9 sequences: every product of user-given sizes goes through
// these helpers, which throw input_error instead of wrapping around.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "planner/util/input_error.hpp"

namespace trainplan {

inline std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, std::string_view what) {
  std::uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    throw input_error(std::string(what) + " is larger than 64 bits can hold");
  return out;
}

inline std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, std::string_view what) {
  std::uint64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    throw input_error(std::string(what) + " is larger than 64 bits can hold");
  return out;
}

// Whether the product fits, for a caller that builds its message only on failure.
inline bool product_fits_64_bits(std::initializer_list<std::uint64_t> factors) {
  std::uint64_t out = 1;
  for (std::uint64_t f : factors)
    if (__builtin_mul_overflow(out, f, &out)) return false;
  return true;
}

inline std::uint64_t checked_product(std::initializer_list<std::uint64_t> factors, std::string_view what) {
  std::uint64_t out = 1;
  for (std::uint64_t f : factors) out = checked_mul(out, f, what);
  return out;
}

}  // namespace trainplan
