#pragma once
// A typed window onto a buffer: the CPU kernels read every element as float and write it back rounded
// to the buffer's dtype (bf16 and fp16 with round-to-nearest-even), so a 16-bit tensor really is stored
// in 16 bits and every store loses exactly what the GPU's would.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "planner/util/dtype.hpp"

namespace trainplan::kernels {

// bf16: the top 16 bits of an fp32, rounded to nearest even (NaN kept quiet).
inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

inline float bf16_to_float(std::uint16_t h) {
  std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// IEEE binary16 with round-to-nearest-even, subnormals, and overflow to infinity.
std::uint16_t float_to_fp16(float f);
float fp16_to_float(std::uint16_t h);

// Rounds a float to what a store into `t` keeps.
float round_to(dtype t, float v);

struct view {
  void* data = nullptr;
  dtype type = dtype::fp32;
  std::size_t size = 0;  // elements

  float get(std::size_t i) const {
    switch (type) {
      case dtype::fp32: case dtype::tf32: return static_cast<const float*>(data)[i];
      case dtype::bf16: return bf16_to_float(static_cast<const std::uint16_t*>(data)[i]);
      case dtype::fp16: return fp16_to_float(static_cast<const std::uint16_t*>(data)[i]);
      case dtype::u8: case dtype::fp8: return static_cast<const std::uint8_t*>(data)[i];
      case dtype::i32: return static_cast<float>(static_cast<const std::int32_t*>(data)[i]);
      case dtype::i64: return static_cast<float>(static_cast<const std::int64_t*>(data)[i]);
    }
    return 0;
  }
  void set(std::size_t i, float v) const {
    switch (type) {
      case dtype::fp32: case dtype::tf32: static_cast<float*>(data)[i] = v; return;
      case dtype::bf16: static_cast<std::uint16_t*>(data)[i] = float_to_bf16(v); return;
      case dtype::fp16: static_cast<std::uint16_t*>(data)[i] = float_to_fp16(v); return;
      case dtype::u8: case dtype::fp8: static_cast<std::uint8_t*>(data)[i] = static_cast<std::uint8_t>(v); return;
      case dtype::i32: static_cast<std::int32_t*>(data)[i] = static_cast<std::int32_t>(v); return;
      case dtype::i64: static_cast<std::int64_t*>(data)[i] = static_cast<std::int64_t>(v); return;
    }
  }
  void add(std::size_t i, float v) const { set(i, get(i) + v); }
  std::int32_t get_i32(std::size_t i) const { return static_cast<const std::int32_t*>(data)[i]; }
  view slice(std::size_t offset, std::size_t count) const {
    return {static_cast<std::byte*>(data) + offset * dtype_bytes(type), type, count};
  }
};

}  // namespace trainplan::kernels
