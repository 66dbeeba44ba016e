#pragma once
// Walks the events of training steps over the inventory and finds the peak: when it happens and what
// is live then. Step 1 differs from later steps (optimizer state appears at its first optimizer step);
// the first micro-batch of a step differs from later ones (gradients exist from its backward on).
#include <cstdint>
#include <string>
#include <vector>

#include "planner/memory/inventory.hpp"

namespace trainplan {

struct timeline_point {
  int step = 1;                      // 1: first step; 2: every later step (identical to each other)
  std::uint64_t micro_batch = 0;     // 0-based; micro-batches 2..k-1 repeat micro-batch 1
  event_kind kind = event_kind::fwd_embed;
  std::uint64_t layer = 0;           // for fwd_layer / bwd_layer
  std::uint64_t live_bytes = 0;      // tensor bytes live during the event
};

std::string describe_point(const timeline_point& p, std::uint64_t grad_accum);  // "step 2, micro-batch 1 of 4, backward layer 31"
std::string phase_name(const timeline_point& p);  // "backward layer 31"

struct live_tensor {
  const tensor_spec* spec = nullptr;
  std::uint64_t instances = 0;       // layers live (1 for a non-layer buffer)
  std::uint64_t bytes = 0;           // instances * spec->bytes
};

struct timeline_result {
  timeline_point peak;
  std::vector<live_tensor> live_at_peak;  // in inventory order (peak_and_live, every_event)
  std::uint64_t category_bytes_at_peak[tensor_category_count] = {};
  std::vector<timeline_point> points;     // every simulated event (every_event)
};

enum class timeline_detail {
  peak,            // the peak and the bytes of each category there (fast: a sweep's path)
  peak_and_live,   // also the list of buffers live at the peak
  every_event,     // also every simulated event's live bytes (points)
};

// Simulates step 1 and step 2, each with micro-batch 0 and (when grad_accum > 1) micro-batch 1, and
// finds the first event with the largest live bytes.
//
// Without every_event only the events that can hold that peak are visited: later layers of a forward
// pass hold strictly more than earlier ones (each keeps its input at least), earlier layers of a backward
// pass hold strictly more than later ones; step 2 holds strictly more than step 1 wherever optimizer
// state exists, and equal otherwise; a later micro-batch holds the gradients during its forward (more)
// and the same during its backward; the embedding's events hold strict subsets of the last layer's. So
// the first maximum is always among: step 1's optimizer step, the forward's last layer, head and loss of
// the last simulated micro-batch, and the backward's head and last layer of the first micro-batch, in the
// step that first holds the most. Where gradients appear layer by layer (PyTorch creates each .grad
// when its backward runs), a backward layer event holds what the layers not yet done saved plus the
// gradients of the layers done, which is linear in the number done: its largest value is at the first or
// the last backward layer, so those and the embedding's backward are visited too. The embedding's backward
// is also visited when a buffer begins there (an fp32 embedding gradient a stack makes in that backward).
// tests/planner/test_timeline.cpp checks this equals the full walk across a grid of configurations.
timeline_result walk_timeline(const inventory& inv, std::uint64_t grad_accum, timeline_detail detail);

// Instances of `t` live at micro-batch event `event` (0 when not live). Exposed for tests.
std::uint64_t instances_live(const tensor_spec& t, std::int64_t event);

}  // namespace trainplan
