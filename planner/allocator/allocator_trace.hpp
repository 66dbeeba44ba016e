#pragma once
// Replays training steps' allocations and frees, as the inventory's lifetimes order them, through the
// simulated caching allocator (planner/allocator/caching_allocator.hpp): what PyTorch reserves from the device.
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "planner/model/model_facts.hpp"
#include "planner/memory/inventory.hpp"

namespace trainplan {

struct allocator_replay {
  std::uint64_t peak_allocated_bytes = 0;  // max_memory_allocated(): tensors, rounded to the allocator's blocks
  std::uint64_t peak_reserved_bytes = 0;   // max_memory_reserved(): segments taken from the device
  // With a capacity: whether an allocation found no room even after the allocator freed its unused cached
  // segments (the program stops there with an out-of-memory error: its buffer and 0-based step, -1 while
  // creating the model), and how often before that it had to free them (each time, it synchronizes the
  // device).
  bool out_of_memory = false;
  std::string_view failed_tensor;
  int failed_step = 0;
  std::uint64_t cache_releases = 0;
  // Segments it made (cudaMalloc calls: memory_stats()'s num_device_alloc), those it gave back included; with
  // expandable segments, the address ranges it reserved.
  std::uint64_t segments_made = 0;
  // With a failure: the peak reserved (workspaces left out) and the segments made before the allocation that
  // failed. The run stops there (PyTorch raises its out-of-memory error; cudaMalloc made no segment for it), where
  // the replay, to go on, takes a segment past the capacity. Set by replay_compiled (replay_program.hpp).
  std::uint64_t reserved_before_failure_bytes = 0, segments_before_failure = 0;
  // The first event at which a check against the capacity failed (the allocator freed its cache or ran out):
  // before it, the replay was the one with no limit, event for event. ~0: none failed. Set by replay_compiled.
  std::size_t first_failed_check_event = ~std::size_t{0};
  // Set by apply_allocator_replay (planner/evaluate/plan.hpp): whether the tensors alone, in the allocator's blocks,
  // fit the capacity, so that a failure is the allocator's fragmentation.
  bool tensors_fit = true;
  // Also set by apply_allocator_replay: max_memory_reserved() of the replay in what the budget leaves it, the
  // cache it keeps included: what a measurement on that GPU reads (plan check compares it), where
  // peak_reserved_bytes becomes the least memory in which the replay completes; up to the failure for a run
  // that runs out.
  std::uint64_t budget_reserved_bytes = 0;
  // What the replay did (plan bench --planner): allocator events (allocations and frees) replayed, and those of
  // the last step left out because it began where the step before began (replay_program.hpp's fixed point).
  std::uint64_t events_replayed = 0;
  std::uint64_t events_skipped = 0;
  // The capacities, in the caller's bytes, in which the replay makes the same choices event for event, and so
  // ends the same way: [same_replay_from_bytes, same_replay_below_bytes) (planner/allocator/capacity_checks.hpp).
  // Set by replay_compiled (replay_program.hpp); the empty range elsewhere.
  std::uint64_t same_replay_from_bytes = ~0ull, same_replay_below_bytes = 0;
};

// Model state is allocated parameter by parameter (PyTorch keeps one tensor per parameter, and foreach
// AdamW one state tensor per parameter); activations one tensor per buffer and layer. Within an event the
// replay follows program order, the inventory's order of a layer's buffers (planner/profiles/hf/activations_hf_rows.hpp): a
// forward event's working buffers die once the next buffer that outlives the event exists; a backward event
// recomputes (checkpointing) first, then walks the layer in reverse, allocating gradients and freeing saved
// buffers as it reaches them; a backward event written op by op (inventory::backward_programs) follows its
// steps instead. Creation and the optimizer step allocate, then free.
// Simulates the model's creation and `steps` optimizer steps (the measurements read step 3), with segments
// limited to `capacity_bytes` in all (what cudaMalloc can hand out; default unlimited).
// Each time an allocation raises what the allocator reserves: with PyTorch's default allocator (no
// capacity) one new segment of `added_bytes`; with expandable segments, pages mapped.
struct allocator_growth {
  std::string_view tensor;     // the buffer whose allocation took a new segment
  std::uint64_t reserved_bytes = 0;  // reserved after it
  int step = 0;                // 0-based optimizer step, -1 while creating the model
  std::uint64_t added_bytes = 0;     // reserved after it less reserved before
  bool small_pool = false;           // the request was 1 MiB or less (kSmallSize): the small pool's segment
};
// The allocations and frees of a replay in program order, with each buffer's sizes: built once, replayed at
// several capacities (the bisection for the least memory a run needs: planner/evaluate/plan.cpp). With
// `stop_at_out_of_memory` a replay returns at the first allocation that finds no room (the program would
// stop there): enough for a yes-or-no probe, but its peaks are then those up to that allocation.
struct allocator_schedule {
  struct op {
    std::uint64_t instance;  // one allocation of a buffer: for a layer, a micro-batch, a step
    std::uint32_t tensor;    // index in inv->tensors
    int step;                // 0-based optimizer step, -1 while creating the model
    bool free;
    // An allocation: the one of sizes[tensor] at this index (a backward step that places one parameter's
    // gradient), or -1: all of them but those placed so (placed[tensor]).
    std::int32_t piece = -1;
  };
  const inventory* inv = nullptr;  // must outlive the schedule
  std::uint64_t instances = 0;
  std::vector<op> ops;
  std::vector<std::vector<std::uint64_t>> sizes;  // by tensor: the tensors PyTorch allocates for one instance
  std::vector<std::vector<bool>> placed;          // by tensor: which of those a backward step allocates (else empty)
  std::vector<std::uint32_t> allocated;           // the buffers the operations allocate, each once, in that order
  // The allocator it replays through: PyTorch's default (planner/allocator/caching_allocator.hpp), or with
  // PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (planner/allocator/expandable_allocator.hpp), whose segments'
  // address space is sized from the GPU's memory (80 GiB when not set).
  bool expandable_segments = false;
  std::uint64_t gpu_total_bytes = 80ull << 30;
  // PyTorch's cuBLAS workspaces (aten/src/ATen/cuda/CublasHandlePool.cpp: one per handle and stream, a handle
  // per thread), one of `workspace_bytes` each; 0: none. They come from the caching allocator when a thread
  // runs its first GEMM and are never freed: the forward's in step 1's first layer, the autograd engine's at
  // the start of step 1's backward, where it takes a block the forward freed (a 48 MiB one of GPT-2's
  // gelu_new in GPT-2's recorded histories, data/measurements/allocator-history-*), which changes
  // where later tensors go. The replay makes them at the start of those events (`workspace_ops`: the
  // operations they come before) but reports its peaks and takes its capacity without them, as the planner
  // counts them on a line of their own (runtime_overhead::cublas_workspace_bytes).
  std::uint64_t workspace_bytes = 0;
  std::array<std::size_t, 2> workspace_ops{};
  // PyTorch's cuBLASLt workspaces (CublasHandlePool.cpp, getCUDABlasLtWorkspace: one per handle and stream, of
  // CUBLASLT_WORKSPACE_SIZE, 1024 KiB by default, kept once made), which a thread makes at its first GEMM
  // with a bias (addmm's gemm_and_bias: GPT-2's Conv1D, Qwen2's q, k, v): the replay makes one right after each
  // cuBLAS workspace whose thread runs such a GEMM (`lt_after`: the forward's; the autograd engine's when it
  // recomputes checkpointed layers). Unlike the cuBLAS workspaces they count in the replay's peaks: no
  // overhead line holds them. The recorded histories show each (GPT-2's and Qwen2's: a 1 MiB block never
  // freed, one 2 MiB small segment where no other has room).
  std::uint64_t lt_workspace_bytes = 0;
  std::array<bool, 2> lt_after{};
  // Where each step's operations begin in `ops` (steps + 1 entries, the last ops.size()); empty for a schedule
  // made by hand, which is then replayed without the fixed-point shortcut (replay_program.hpp).
  std::vector<std::size_t> step_ops;
  // Where each micro-batch's operations begin in `ops`, step by step: micro_batch_ops[step * (micro_batches + 1)
  // + k] for micro-batch k, and at k == micro_batches where the step's optimizer begins; empty with step_ops.
  // The fixed point compares the later micro-batches of a step too (replay_program.hpp).
  std::size_t micro_batches = 0;
  std::vector<std::size_t> micro_batch_ops;
};
allocator_schedule schedule_allocations(const inventory& inv, const model_facts& facts, std::uint64_t grad_accum,
                                        int steps = 3);
// `like`, a schedule of an inventory that differs from `inv` only in its buffers' sizes (shapes, dtypes, bytes:
// program_cache's structure key), with inv's sizes: the same operations, in the same order, which depend on the
// buffers' lifetimes, places and names, not on their sizes: where an operation names one tensor of a buffer (a
// backward program placing a parameter's gradient), the tensor's place among the parameters, which the model's
// facts fix (a buffer that no longer splits into them throws, as schedule_allocations does). Only the sizes are
// worked out again. Without `with_operations` the result's ops are left empty: its sizes and the rest, for
// refill_program (replay_program.hpp), which reads no operation, without copying them.
allocator_schedule resize_schedule(const allocator_schedule& like, const inventory& inv, const model_facts& facts,
                                   bool with_operations = true);
// How many buffer instances schedule_allocations would make, at most (without making them): what a replay
// costs in time and host memory, about 100 bytes an instance and its two operations.
std::uint64_t count_schedule_instances(const inventory& inv, const model_facts& facts, std::uint64_t grad_accum,
                                       int steps = 3);
// The replay: the schedule compiled into a flat program and run through the fast allocator
// (planner/allocator/replay_program.hpp), through fast_expandable_allocator where the schedule asks for expandable segments.
allocator_replay replay_schedule(const allocator_schedule& schedule, std::vector<allocator_growth>* growth = nullptr,
                                 std::uint64_t capacity_bytes = ~0ull, bool stop_at_out_of_memory = false);

// What the allocator holds after one event (an allocate or free call) of a replay: the tests compare the
// fast replay with the reference event by event.
struct allocator_event_state {
  std::uint64_t allocated_bytes = 0, reserved_bytes = 0, segments = 0;
  bool operator==(const allocator_event_state&) const = default;
};
// The reference replay, slow and plain: each operation of the schedule in turn through caching_allocator (or
// expandable_allocator), each instance's blocks held in a vector of its own. Kept for the tests that prove the
// fast replay equal to it; with `events`, the state after each event.
allocator_replay replay_schedule_reference(const allocator_schedule& schedule, std::vector<allocator_growth>* growth = nullptr,
                                           std::uint64_t capacity_bytes = ~0ull, bool stop_at_out_of_memory = false,
                                           std::vector<allocator_event_state>* events = nullptr);

allocator_replay replay_allocator(const inventory& inv, const model_facts& facts, std::uint64_t grad_accum,
                                  int steps = 3, std::vector<allocator_growth>* growth = nullptr,
                                  std::uint64_t capacity_bytes = ~0ull);

}  // namespace trainplan
