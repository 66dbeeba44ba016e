// Optimizer names and the state buffers of each optimizer (optimizer.hpp, which cites each one's source): AdamW,
// SGD, Lion, Adafactor's factored second moment and bitsandbytes' blockwise 8-bit AdamW.
#include "planner/run/optimizer.hpp"

#include <fmt/format.h>

#include "planner/util/checked_math.hpp"
#include "planner/util/input_error.hpp"
#include "planner/util/names.hpp"

namespace trainplan {
namespace {

constexpr named<optimizer_kind> optimizer_names[] = {
    {optimizer_kind::adamw, "adamw"},         {optimizer_kind::sgd, "sgd"},
    {optimizer_kind::sgd_momentum, "sgd-momentum"}, {optimizer_kind::adafactor, "adafactor"},
    {optimizer_kind::adamw_8bit, "adamw-8bit"}, {optimizer_kind::lion, "lion"},
    // The names users know from elsewhere (the first name of a kind is the one printed): bitsandbytes' class
    // AdamW8bit, and transformers' TrainingArguments optim values "adamw_torch" and "adamw_bnb_8bit"
    // (transformers/training_args.py, OptimizerNames).
    {optimizer_kind::adamw, "adamw_torch"},    {optimizer_kind::adamw_8bit, "adamw8bit"},
    {optimizer_kind::adamw_8bit, "adamw_8bit"}, {optimizer_kind::adamw_8bit, "adamw_bnb_8bit"},
};
constexpr named<optimizer_impl_kind> optimizer_impl_names[] = {
    {optimizer_impl_kind::foreach_impl, "foreach"},
    {optimizer_impl_kind::fused, "fused"},
};

constexpr std::uint64_t bnb_block_elements = 2048;   // bitsandbytes blockwise 8-bit optimizer block
constexpr std::uint64_t bnb_min_8bit_elements = 4096; // smaller tensors keep fp32 state

}  // namespace

std::string_view optimizer_name(optimizer_kind o) { return name_of(optimizer_names, o); }

optimizer_kind parse_optimizer(std::string_view text) {
  return parse_named(optimizer_names, text, "--optimizer", "optimizer");
}

std::string_view optimizer_impl_name(optimizer_impl_kind o) { return name_of(optimizer_impl_names, o); }

optimizer_impl_kind parse_optimizer_impl(std::string_view text) {
  return parse_named(optimizer_impl_names, text, "--optimizer-impl", "implementation");
}

optimizer_state_buffers optimizer_state(optimizer_kind o, const std::vector<param_tensor>& params,
                                        const layer_counts& layers, dtype state_dtype) {
  const char* what = "optimizer state bytes";
  std::uint64_t trainable = 0;
  for (const param_tensor& p : params)
    trainable = checked_add(trainable, checked_mul(p.count, layers.instances(p), what), what);
  const std::uint64_t full = checked_mul(trainable, dtype_bytes(state_dtype), what);

  switch (o) {
    case optimizer_kind::adamw:
      return {{"adam.m", state_dtype, full}, {"adam.v", state_dtype, full}};
    case optimizer_kind::sgd:
      return {};
    case optimizer_kind::sgd_momentum:
      return {{"sgd.momentum", state_dtype, full}};
    case optimizer_kind::lion:
      return {{"lion.m", state_dtype, full}};
    case optimizer_kind::adafactor: {
      std::uint64_t elements = 0;
      for (const param_tensor& p : params) {
        std::uint64_t per = p.count;
        // Factored over the last two dims (HF Adafactor, _approx_sq_grad): row statistics over all but the
        // last dim, column statistics over all but the one before it. A stack of E expert matrices
        // [E, r, c] keeps E*r + E*c; one matrix [r, c] keeps r + c.
        if (p.shape.size() >= 2)
          per = checked_add(p.count / p.shape.back(), p.count / p.shape[p.shape.size() - 2], what);
        elements = checked_add(elements, checked_mul(per, layers.instances(p), what), what);
      }
      return {{"adafactor.v", state_dtype, checked_mul(elements, dtype_bytes(state_dtype), what)}};
    }
    case optimizer_kind::adamw_8bit: {
      std::uint64_t bytes = 0;
      for (const param_tensor& p : params) {
        std::uint64_t per = p.count < bnb_min_8bit_elements
                                ? checked_mul(p.count, dtype_bytes(dtype::fp32), what)
                                : checked_add(p.count, ((p.count + bnb_block_elements - 1) / bnb_block_elements) * 4, what);
        bytes = checked_add(bytes, checked_mul(per, layers.instances(p), what), what);
      }
      return {{"adam8bit.m", dtype::u8, bytes}, {"adam8bit.v", dtype::u8, bytes}};
    }
  }
  return {};
}

std::uint64_t optimizer_state_traffic_bytes(const optimizer_state_buffers& state) {
  std::uint64_t bytes = 0;
  for (const auto& s : state) bytes = checked_add(bytes, checked_mul(s.bytes, 2, "optimizer traffic"), "optimizer traffic");
  return bytes;
}

}  // namespace trainplan
