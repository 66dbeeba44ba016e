// The simulated PyTorch caching allocator (planner/allocator/caching_allocator.hpp) on constructed cases, rule by
// rule as c10/cuda/CUDACachingAllocator.cpp states them.
#include <catch2/catch.hpp>

#include "planner/model/model_facts.hpp"
#include "planner/allocator/caching_allocator.hpp"

using trainplan::caching_allocator;

namespace {
constexpr std::uint64_t MiB = 1ull << 20;
}

TEST_CASE("requests round to 512 bytes, segments are 2 MiB, 20 MiB or the request rounded to 2 MiB", "[allocator]") {
  CHECK(caching_allocator::round_size(1) == 512);
  CHECK(caching_allocator::round_size(513) == 1024);
  CHECK(caching_allocator::segment_size(512) == 2 * MiB);          // small pool
  CHECK(caching_allocator::segment_size(MiB) == 2 * MiB);          // 1 MiB is still small
  CHECK(caching_allocator::segment_size(MiB + 512) == 20 * MiB);   // under 10 MiB: a 20 MiB segment
  CHECK(caching_allocator::segment_size(10 * MiB) == 10 * MiB);    // from 10 MiB: rounded to 2 MiB
  CHECK(caching_allocator::segment_size(11 * MiB) == 12 * MiB);
}

TEST_CASE("small requests share a 2 MiB segment, medium ones a 20 MiB segment", "[allocator]") {
  caching_allocator a;
  for (int i = 0; i < 4; ++i) a.allocate(1000);  // 1024 bytes each
  CHECK(a.reserved_bytes() == 2 * MiB);
  CHECK(a.allocated_bytes() == 4 * 1024);
  a.allocate(3 * MiB);
  a.allocate(3 * MiB);
  CHECK(a.reserved_bytes() == 22 * MiB);  // both 3 MiB blocks come out of one 20 MiB segment
  CHECK(a.segments() == 2);
}

TEST_CASE("a large block is split only when more than 1 MiB would remain, and counts whole otherwise", "[allocator]") {
  caching_allocator a;
  const auto big = a.allocate(100 * MiB);
  a.free(big);
  a.allocate(99 * MiB + 512);  // 512 KiB would remain: not split, the whole block is allocated
  CHECK(a.allocated_bytes() == 100 * MiB);
  CHECK(a.reserved_bytes() == 100 * MiB);
  caching_allocator b;
  b.free(b.allocate(100 * MiB));
  b.allocate(50 * MiB);  // 50 MiB remain: split
  CHECK(b.allocated_bytes() == 50 * MiB);
  b.allocate(50 * MiB);  // the remainder serves the next request: no new segment
  CHECK(b.reserved_bytes() == 100 * MiB);
}

TEST_CASE("best fit takes the smallest free block that is large enough", "[allocator]") {
  caching_allocator a;
  const auto b40 = a.allocate(40 * MiB), b20 = a.allocate(20 * MiB), b60 = a.allocate(60 * MiB);
  a.free(b40), a.free(b20), a.free(b60);
  a.allocate(18 * MiB);  // fits in the 20 MiB block (2 MiB remain: split) rather than the others
  a.allocate(39 * MiB);  // the 40 MiB block
  a.allocate(59 * MiB);  // the 60 MiB block
  CHECK(a.reserved_bytes() == 120 * MiB);
  a.allocate(30 * MiB);  // nothing free is large enough: a new segment
  CHECK(a.reserved_bytes() == 150 * MiB);
}

TEST_CASE("freed neighbours merge, and segments are never given back", "[allocator]") {
  caching_allocator a;
  a.free(a.allocate(100 * MiB));
  const auto x = a.allocate(30 * MiB), y = a.allocate(30 * MiB), z = a.allocate(30 * MiB);
  a.free(x), a.free(z), a.free(y);  // y merges with both neighbours (and the 10 MiB tail)
  CHECK(a.allocated_bytes() == 0);
  a.allocate(100 * MiB);            // the whole segment again
  CHECK(a.reserved_bytes() == 100 * MiB);
  CHECK(a.peak_reserved_bytes() == 100 * MiB);
  CHECK(a.peak_allocated_bytes() == 100 * MiB);
}

// ---- the replay's order within an event (planner/allocator/allocator_schedule.cpp) --------------------------------------
// One-layer (or two-layer) inventories by hand: events fwd_embed 0, fwd_layer i: 1+i, fwd_head L+1, loss L+2,
// bwd_head L+3, bwd_layer i: L+4+(L-1-i), bwd_embed 2L+4.

#include "planner/allocator/allocator_trace.hpp"

namespace {

using namespace trainplan;

tensor_spec buffer(std::string_view name, std::uint64_t bytes, std::int64_t first, std::int64_t last,
                   tensor_category cat = tensor_category::activations, std::int64_t step = 0) {
  tensor_spec t(name, {bytes}, dtype::u8, bytes, cat);
  t.lifetime = state_lifetime::micro_batch;
  t.interval_count = 1;
  t.intervals[0] = {first, step, last, step};
  return t;
}

inventory by_hand(std::uint64_t layers, std::vector<tensor_spec> tensors) {
  inventory inv;
  inv.layers = layers;
  inv.events_per_micro_batch = static_cast<std::int64_t>(2 * layers + 5);
  inv.tensors = std::move(tensors);
  return inv;
}

constexpr std::uint64_t GiB = 1ull << 30;

}  // namespace

TEST_CASE("replay: a forward working buffer is freed once the next buffer that outlives the event exists", "[allocator]") {
  // _scaled_dot_product_attention_math: the scores die when _safe_softmax's result exists, and the layer's
  // later buffers (the MLP's) take their block. Allocating the whole event before freeing would reserve a
  // third segment (2 GiB + 100 MiB); freeing the scores before the probabilities exist would let those take
  // the scores' block (1 GiB + 100 MiB).
  const inventory inv = by_hand(1, {buffer("scores", GiB, 1, 1), buffer("probs", GiB, 1, 5), buffer("mlp", 100 * MiB, 1, 5)});
  const allocator_replay r = replay_allocator(inv, model_facts{}, 1);
  CHECK(r.peak_reserved_bytes == 2 * GiB);
  CHECK(r.peak_allocated_bytes == 2 * GiB);  // the scores and the probabilities, before the MLP
}

TEST_CASE("replay: buffers kept from the forward live until their layer's backward event ends", "[allocator]") {
  // The timeline's rule (every buffer whose lifetime covers the event is live at once), which the replay
  // keeps so that it never holds less than the timeline: a gradient of the event cannot take their block.
  const inventory inv = by_hand(1, {buffer("d_in", GiB, 5, 5, tensor_category::activation_grads), buffer("saved", GiB, 1, 5)});
  CHECK(replay_allocator(inv, model_facts{}, 1).peak_reserved_bytes == 2 * GiB);
}

TEST_CASE("replay: a checkpointed layer recomputes its saved buffers before its backward frees them in reverse", "[allocator]") {
  // Non-reentrant checkpointing (torch/utils/checkpoint.py) reruns the layer's forward when its backward
  // first unpacks a saved tensor; the backward then releases them node by node. The recomputed buffers are
  // the backward event's buffers that are not gradients.
  const inventory inv = by_hand(1, {buffer("d_in", GiB, 5, 5, tensor_category::activation_grads), buffer("recomputed", GiB, 5, 5)});
  const allocator_replay r = replay_allocator(inv, model_facts{}, 1);
  CHECK(r.peak_reserved_bytes == GiB);  // recomputed, freed by the walk, its block then taken by d_in
  CHECK(r.peak_allocated_bytes == GiB);
}

TEST_CASE("replay: the next layer's input is the output of the previous layer's event", "[allocator]") {
  // Two layers. Each forward event makes a 1 GiB working buffer and keeps a 1 GiB one; layer i's 100 MiB
  // input is created by event i (the embedding, then layer 0). Created at the end of layer 0's event, layer
  // 1's input takes part of the freed working block, so layer 1's working buffer needs a new segment.
  tensor_spec input = buffer("layer{}.in", 100 * MiB, 0, 7, tensor_category::activations, 1);
  tensor_spec work = buffer("layer{}.work", GiB, 1, 1, tensor_category::activations, 1);
  tensor_spec kept = buffer("layer{}.kept", GiB, 1, 7, tensor_category::activations, 1);
  for (tensor_spec* t : {&input, &work, &kept}) t->per_layer = true, t->layer_begin = 0, t->layer_end = 2;
  input.intervals[0] = {0, 1, 7, -1};  // layer i: from event i to its backward, 7 - i
  kept.intervals[0] = {1, 1, 7, -1};
  const inventory inv = by_hand(2, {input, work, kept});
  // Allocated at the event's start instead, it would take a segment of its own: 3 GiB + 200 MiB.
  CHECK(replay_allocator(inv, model_facts{}, 1).peak_reserved_bytes == 4 * GiB + 100 * MiB);
}

TEST_CASE("replay: a temporary with a free point of its own is freed right after the buffer it names", "[allocator]") {
  // tensor_spec::freed_after: hf's GPT-2 forward op by op, where a temporary dies when the op that ends its
  // Python variable has written its output, not when the next kept buffer exists.
  tensor_spec temp = buffer("temp", GiB, 1, 1), kept = buffer("kept", 100 * MiB, 1, 5), after = buffer("after", GiB, 1, 1);
  temp.momentary = true;
  // By default freed once `kept` exists: `after` then takes its block.
  CHECK(replay_allocator(by_hand(1, {temp, kept, after}), model_facts{}, 1).peak_reserved_bytes == GiB + 100 * MiB);
  // Freed after `after` (index 2) is allocated: the two are alive at once.
  temp.freed_after = 2;
  CHECK(replay_allocator(by_hand(1, {temp, kept, after}), model_facts{}, 1).peak_reserved_bytes == 2 * GiB + 100 * MiB);
}

TEST_CASE("replay: PyTorch's cuBLAS workspaces take blocks as tensors do, and the peaks leave them out", "[allocator]") {
  // The forward's is made at the start of step 1's first layer, the autograd engine's at the start of its
  // backward, where a 48 MiB block the forward freed holds it (as S1's recorded history shows).
  const tensor_spec work = buffer("work", 48 * MiB, 1, 1), kept = buffer("kept", 100 * MiB, 1, 5);
  const inventory inv = by_hand(1, {work, kept});
  allocator_schedule schedule = schedule_allocations(inv, model_facts{}, 1, 1);  // one step
  const allocator_replay without = replay_schedule(schedule);
  CHECK(without.peak_reserved_bytes == 148 * MiB);
  schedule.workspace_bytes = 32 * MiB;
  std::vector<allocator_growth> growth;
  const allocator_replay with = replay_schedule(schedule, &growth);
  // Segments: the forward's workspace (32 MiB), the work (48), kept (100); the backward's workspace fits in the
  // freed work block. Reserved 180 MiB, reported less the two workspaces.
  CHECK(with.segments_made == 3);
  CHECK(with.peak_reserved_bytes == 180 * MiB - 64 * MiB);
  REQUIRE(growth.size() == 3);
  CHECK(growth[0].tensor == "cuBLAS workspace");
  CHECK(growth[0].added_bytes == 32 * MiB);
  // A capacity is what the tensors may take beside them: 116 MiB completes, 2 MiB less runs out.
  CHECK_FALSE(replay_schedule(schedule, nullptr, 116 * MiB).out_of_memory);
  CHECK(replay_schedule(schedule, nullptr, 114 * MiB).out_of_memory);
  // With no block free for it, the backward's workspace takes a segment of its own.
  const inventory no_free = by_hand(1, {kept});
  allocator_schedule alone = schedule_allocations(no_free, model_facts{}, 1, 1);
  alone.workspace_bytes = 32 * MiB;
  const allocator_replay both = replay_schedule(alone);
  CHECK(both.segments_made == 3);
  CHECK(both.peak_reserved_bytes == 100 * MiB);
}

// ---- a GPU of limited memory: cudaMalloc fails, the allocator frees its unused cached segments ---------------
// c10/cuda/CUDACachingAllocator.cpp, malloc(): alloc_block, then release_available_cached_blocks (nothing
// without max_split_size), then release_cached_blocks (every free block that is a whole segment) and
// alloc_block once more; then the out-of-memory error.

TEST_CASE("at its capacity the allocator frees whole free segments and tries again", "[allocator]") {
  caching_allocator a;
  a.set_capacity(300 * MiB);
  a.free(a.allocate(100 * MiB));  // a cached, unused 100 MiB segment
  a.allocate(150 * MiB);          // 250 MiB reserved
  a.allocate(120 * MiB);          // 370 MiB would be over: the 100 MiB segment goes, then 270 MiB
  CHECK_FALSE(a.out_of_memory());
  CHECK(a.cache_releases() == 1);
  CHECK(a.reserved_bytes() == 270 * MiB);
  CHECK(a.peak_reserved_bytes() == 270 * MiB);
}

TEST_CASE("a segment with a live block is not freed: fragmentation runs the allocator out of memory", "[allocator]") {
  caching_allocator a;
  a.set_capacity(300 * MiB);
  const auto x = a.allocate(100 * MiB);
  a.allocate(100 * MiB);  // its own segment (nothing free): 200 MiB reserved
  a.free(x);
  a.allocate(60 * MiB);   // splits the freed segment: 40 MiB stay free in it
  a.allocate(80 * MiB);   // no free block of 80 MiB; a new segment would make 280 MiB: fits
  CHECK_FALSE(a.out_of_memory());
  CHECK(a.cache_releases() == 0);
  a.allocate(50 * MiB);   // 40 MiB free in a live segment, 20 MiB of capacity: nothing to release
  CHECK(a.out_of_memory());
  CHECK(a.cache_releases() == 1);
  CHECK(a.allocated_bytes() == 290 * MiB);  // served anyway: the replay reports the demand
  a.allocate(500 * MiB);  // after the failure the capacity no longer applies: no more releases
  CHECK(a.cache_releases() == 1);
}

TEST_CASE("replay within a capacity: released segments let a run fit that reserves more without a limit", "[allocator]") {
  // Two steps of a 1 GiB forward working buffer and a 1.5 GiB backward one: without a limit each keeps its
  // segment (2.5 GiB). With 2 GiB the backward's request frees the cached 1 GiB segment first.
  const inventory inv = by_hand(1, {buffer("work", GiB, 1, 1), buffer("d_work", GiB + GiB / 2, 5, 5, tensor_category::activation_grads)});
  const allocator_replay free_run = replay_allocator(inv, model_facts{}, 1);
  CHECK(free_run.peak_reserved_bytes == 2 * GiB + GiB / 2);
  CHECK_FALSE(free_run.out_of_memory);
  const allocator_replay limited = replay_allocator(inv, model_facts{}, 1, 3, nullptr, 2 * GiB);
  CHECK_FALSE(limited.out_of_memory);
  CHECK(limited.cache_releases >= 1);
  CHECK(limited.peak_reserved_bytes == GiB + GiB / 2);
  const allocator_replay too_small = replay_allocator(inv, model_facts{}, 1, 3, nullptr, GiB + GiB / 4);
  CHECK(too_small.out_of_memory);
  CHECK(too_small.failed_tensor == "d_work");
  CHECK(too_small.failed_step == 0);
}
