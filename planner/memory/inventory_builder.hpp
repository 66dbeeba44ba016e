#pragma once
// Adds buffers to an inventory with their lifetimes in micro-batch events (planner/memory/inventory.hpp). Used
// by the inventory of each framework profile; not part of the planner's public interface.
#include <fmt/format.h>

#include "planner/util/checked_math.hpp"
#include "planner/util/input_error.hpp"
#include "planner/memory/inventory.hpp"

namespace trainplan {

// Collects buffers; shapes are multiplied with overflow checks.
class inventory_builder {
 public:
  inventory_builder(std::int64_t layers, std::vector<tensor_spec>& out)
      : L_(layers), range_end_(static_cast<std::uint32_t>(layers)), out_(out) {}

  // The layers that hold the per-layer buffers added from now on: [begin, end); every layer by default.
  // DeepSeek-V3's dense first layers and its MoE layers hold different MLP buffers.
  void set_layer_range(std::uint64_t begin, std::uint64_t end) {
    range_begin_ = static_cast<std::uint32_t>(begin);
    range_end_ = static_cast<std::uint32_t>(end);
  }
  void all_layers() { set_layer_range(0, static_cast<std::uint64_t>(L_)); }
  // Marks `t` as one buffer per layer of the current range.
  tensor_spec& per_layer(tensor_spec& t) const {
    t.per_layer = true;
    t.layer_begin = range_begin_;
    t.layer_end = range_end_;
    return t;
  }

  tensor_spec& add(std::string_view name, const tensor_shape& shape, dtype type, tensor_category cat) {
    std::uint64_t bytes = dtype_bytes(type);
    for (std::uint64_t d : shape)
      if (__builtin_mul_overflow(bytes, d, &bytes))
        throw input_error(fmt::format("tensor {} size is larger than 64 bits can hold", name));
    // Built in place, field by field: inventories are built millions of times in a sweep.
    return out_.emplace_back(name, shape, type, bytes, cat);
  }

  tensor_spec& model_state(std::string_view name, std::uint64_t elements, dtype type, tensor_category cat,
                           state_lifetime life, tensor_role role, param_scope scope = param_scope::none) {
    tensor_spec& t = add(name, {elements}, type, cat);
    t.lifetime = life;
    t.role = role;
    t.scope = scope;
    return t;
  }

  // A fixed interval of event kinds within a micro-batch (non-layer buffers).
  tensor_spec& span(std::string_view name, const tensor_shape& shape, dtype type, tensor_category cat, event_kind first,
                    event_kind last, std::int64_t first_layer = 0) {
    tensor_spec& t = add(name, shape, type, cat);
    t.interval_count = 1;
    t.intervals[0] = {event_index(first, first_layer, L_), 0, event_index(last, 0, L_), 0};
    return t;
  }

  // A per-layer buffer. kept: from forward of layer i (or the event before, for a layer's input, which
  // the previous layer or the embedding writes) to backward of layer i. Otherwise it exists only while
  // its layer's forward runs and again while its backward recomputes it.
  tensor_spec& layer(std::string_view name, const tensor_shape& shape, dtype type, bool kept, bool is_layer_input = false,
             tensor_category cat = tensor_category::activations) {
    // A pipeline stage keeps the activations of every micro-batch in flight: as one batch that many times
    // larger (dimension 0 is the micro-batch of every activation). Shapes are taken by reference and copied
    // only then: a sweep adds millions of buffers.
    tensor_spec& t = kept && cat == tensor_category::activations && inflight_ > 1 ? add(name, in_flight(shape), type, cat)
                                                                                   : add(name, shape, type, cat);
    per_layer(t);
    t.kept_to_backward = kept;
    const std::int64_t fwd0 = event_index(event_kind::fwd_layer, 0, L_);
    const std::int64_t bwd0 = event_index(event_kind::bwd_layer, 0, L_);  // bwd of layer i: bwd0 - i
    if (kept) {
      t.interval_count = 1;
      t.intervals[0] = {is_layer_input ? fwd0 - 1 : fwd0, 1, bwd0, -1};
    } else {
      t.interval_count = 2;
      t.intervals[0] = {fwd0, 1, fwd0, 1};
      t.intervals[1] = {bwd0, -1, bwd0, -1};
    }
    return t;
  }

  void set_inflight(std::uint64_t n) { inflight_ = n; }

  // A per-layer buffer with explicit intervals (1 or 2), for lifetimes the two cases of layer() do not
  // cover: a working set of one event, or autocast's weight cache living from a layer's forward to the
  // end of the forward pass under checkpointing.
  tensor_spec& layer_intervals(std::string_view name, const tensor_shape& shape, dtype type, tensor_category cat,
                               std::initializer_list<event_interval> intervals) {
    tensor_spec& t = per_layer(add(name, shape, type, cat));
    for (const event_interval& iv : intervals) t.intervals[t.interval_count++] = iv;
    return t;
  }

  // The buffers added so far, and one of them by index (indices stay valid; references may not).
  std::size_t count() const { return out_.size(); }
  tensor_spec& tensor(std::size_t i) { return out_[i]; }

  std::int64_t fwd_layer0() const { return event_index(event_kind::fwd_layer, 0, L_); }
  std::int64_t bwd_layer0() const { return event_index(event_kind::bwd_layer, 0, L_); }  // bwd of layer i: bwd0 - i
  std::int64_t event(event_kind kind) const { return event_index(kind, 0, L_); }

 private:
  tensor_shape in_flight(tensor_shape shape) const {
    shape.dims[0] = checked_mul(shape.dims[0], inflight_, "activations in flight");
    return shape;
  }

  std::int64_t L_;
  std::uint32_t range_begin_ = 0, range_end_ = 0;
  std::uint64_t inflight_ = 1;
  std::vector<tensor_spec>& out_;
};

}  // namespace trainplan
