#pragma once
// The hf profile's decoder layer as one list of operations per model family (GPT-2's block, the Llama
// family's decoder layer), in program order. Each operation is described once: the buffers it makes (its
// rows: planner/profiles/hf/activations_hf.cpp walks them into the inventory, in the order the allocator
// replay makes them) and the kernels it launches (its step ops: add_hf_step_ops below walks them into the
// step's work). The lists and the kernels are in hf_layer_ops.cpp; the rows in activations_hf_rows.hpp.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "planner/model/model_spec.hpp"
#include "planner/profiles/hf/activations_hf_row_rules.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"
#include "planner/run/stack_traits.hpp"
#include "planner/time/step_ops_builder.hpp"

namespace trainplan {

struct hf_layer_context;  // what a pass of the layer's kernels depends on (hf_layer_ops.cpp)

// Which group of a step's work an operation's kernels join: every layer's, the dense MLP layers' or the
// Mixture-of-Experts layers' (the same group unless DeepSeek's dense first layers differ from its MoE layers).
enum class layer_part : std::uint8_t { every_layer, dense_mlp, moe_mlp };

// A table of rows (a std::span, but for GCC 12, which refuses a default-constructed std::span in a constant
// expression).
struct hf_row_table {
  const hf_rows::hf_row* first = nullptr;
  std::size_t size = 0;
  constexpr hf_row_table() = default;
  template <std::size_t N>
  constexpr hf_row_table(const hf_rows::hf_row (&rows)[N]) : first(rows), size(N) {}
  constexpr const hf_rows::hf_row* begin() const { return first; }
  constexpr const hf_rows::hf_row* end() const { return first + size; }
};

struct hf_layer_op {
  std::string_view name;
  // The buffers it makes, in program order: up to three tables, as a linear wrapped by peft makes its base's,
  // its adapter's (a table GPT-2's and a Llama's modules share) and then its output.
  std::array<hf_row_table, 3> rows{};
  void (*kernels)(ops::row_group&, const hf_layer_context&) = nullptr;  // none: a working set, not an op
  layer_part part = layer_part::every_layer;
};

// The layer's operations for a model family, in program order.
std::span<const hf_layer_op> hf_layer_ops(model_family family);

// The kernels PyTorch eager launches for a Hugging Face training step (transformers 5.17, torch 2.11): each
// layer's, from its op list, into `layer`, `dense_mlp` or `moe_mlp` by part; the embedding's, final norm's,
// head's and loss's into `head`.
// `traits`: how the stack's modules differ from transformers' (stack_traits::expands_kv_heads, model_upcasts_logits).
void add_hf_step_ops(ops::row_group& layer, ops::row_group& dense_mlp, ops::row_group& moe_mlp, ops::row_group& head,
                     const model_spec& m, const run_config& run, const precision_layout& layout,
                     const stack_traits& traits);

}  // namespace trainplan
