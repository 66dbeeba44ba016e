#pragma once
// Element types of the tensors the planner accounts for.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace trainplan {

enum class dtype { fp32, tf32, bf16, fp16, fp8, u8, i32, i64 };  // i64: PyTorch's token ids
inline constexpr std::size_t dtype_count = 8;

// Storage size of one element. tf32 is a compute mode stored as fp32.
constexpr std::uint64_t dtype_bytes(dtype t) {
  switch (t) {
    case dtype::fp32: case dtype::tf32: case dtype::i32: return 4;
    case dtype::bf16: case dtype::fp16: return 2;
    case dtype::fp8: case dtype::u8: return 1;
    case dtype::i64: return 8;
  }
  return 0;
}

constexpr std::string_view dtype_name(dtype t) {
  switch (t) {
    case dtype::fp32: return "fp32";
    case dtype::tf32: return "tf32";
    case dtype::bf16: return "bf16";
    case dtype::fp16: return "fp16";
    case dtype::fp8: return "fp8";
    case dtype::u8: return "u8";
    case dtype::i32: return "i32";
    case dtype::i64: return "i64";
  }
  return "?";
}

}  // namespace trainplan
