#pragma once
// Optimizers and the state they keep per trainable parameter.
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "planner/util/dtype.hpp"
#include "planner/model/param_count.hpp"

namespace trainplan {

enum class optimizer_kind { adamw, sgd, sgd_momentum, adafactor, adamw_8bit, lion };

std::string_view optimizer_name(optimizer_kind o);
optimizer_kind parse_optimizer(std::string_view text);  // throws input_error

// PyTorch's AdamW implementations: foreach (the default on CUDA) works on lists of tensors and allocates a
// temporary copy of the second moment for its square root; fused is one kernel with no temporaries. Only a
// stack built on PyTorch's optimizers offers the choice (planner/profiles/profile.hpp).
enum class optimizer_impl_kind { foreach_impl, fused };
std::string_view optimizer_impl_name(optimizer_impl_kind o);
optimizer_impl_kind parse_optimizer_impl(std::string_view text);  // throws input_error

struct optimizer_state_buffer {
  std::string_view name;   // "adam.m" (static storage)
  dtype type = dtype::fp32;
  std::uint64_t bytes = 0;
};

// The state buffers for the given trainable tensors (per-layer tensors count `layers` times).
//   adamw: m and v (Loshchilov & Hutter 2019)                      2 x state dtype
//   sgd: none; sgd-momentum: one momentum buffer                    0 / 1 x state dtype
//   lion: one momentum buffer (Chen et al. 2023)                    1 x state dtype
//   adafactor: factored second moment, no first moment (Shazeer & Stern 2018; the Hugging Face default
//     beta1=None): rows + cols values for a matrix, n for a vector, in the state dtype
//   adamw-8bit: m and v at 1 byte each with one fp32 absmax per 2048-element block; tensors under 4096
//     elements stay fp32 (Dettmers et al. 2022 block-wise quantization; bitsandbytes min_8bit_size)
// At most two buffers, held inline: the inventory asks for them for every configuration of a sweep.
struct optimizer_state_buffers {
  std::array<optimizer_state_buffer, 2> buffers{};
  std::size_t count = 0;

  optimizer_state_buffers() = default;
  optimizer_state_buffers(std::initializer_list<optimizer_state_buffer> list) {
    for (const optimizer_state_buffer& b : list) buffers[count++] = b;
  }
  const optimizer_state_buffer* begin() const { return buffers.data(); }
  const optimizer_state_buffer* end() const { return buffers.data() + count; }
  std::size_t size() const { return count; }
};

optimizer_state_buffers optimizer_state(optimizer_kind o, const std::vector<param_tensor>& params,
                                        const layer_counts& layers, dtype state_dtype);

// Bytes the optimizer step reads and writes per trainable parameter, beyond reading the gradient and
// writing the updated weights: each state buffer is read and written once.
std::uint64_t optimizer_state_traffic_bytes(const optimizer_state_buffers& state);

}  // namespace trainplan
