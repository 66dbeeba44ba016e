#pragma once
// One configuration evaluated: memory (inventory, timeline, peak), FLOPs, time, and the verdict.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/model/model_facts.hpp"
#include "planner/allocator/allocator_trace.hpp"
#include "planner/system/calibration.hpp"
#include "planner/time/flops.hpp"
#include "planner/system/gpu_spec.hpp"
#include "planner/memory/inventory.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/model/param_count.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"
#include "planner/time/step_time.hpp"
#include "planner/memory/timeline.hpp"

namespace trainplan {

class program_cache;  // planner/allocator/program_cache.hpp

struct runtime_overhead {
  std::uint64_t cuda_context_bytes = 0;
  std::uint64_t cublas_workspace_bytes = 0;
  // The caching allocator's cached bytes no tensor uses at its peak: replayed (plan_result::allocator), or
  // the calibrated slack fraction x tensor peak where the replay does not run (sweeps, other frameworks).
  std::uint64_t allocator_slack_bytes = 0;
  // NCCL's connection buffers for the run's communicators, allocated by NCCL outside PyTorch's allocator
  // (planner/time/communication.hpp, nccl_memory_bytes); 0 on one GPU or where communication is not modelled.
  std::uint64_t nccl_bytes = 0;
  // What the process holds outside the allocator's cache: the context, the workspaces and NCCL's buffers.
  std::uint64_t fixed_bytes() const { return cuda_context_bytes + cublas_workspace_bytes + nccl_bytes; }
  std::uint64_t total() const { return fixed_bytes() + allocator_slack_bytes; }
};

struct plan_result {
  model_spec model;
  param_counts params;
  run_config run;
  precision_layout layout;
  gpu_spec gpu;
  calibration calib;

  inventory inv;
  timeline_result timeline;
  std::uint64_t tensor_peak_bytes = 0;  // tensors live at the peak event
  runtime_overhead overhead;
  std::uint64_t peak_bytes = 0;         // tensor peak + overhead: what the GPU must hold
  bool fits = false;                    // the GPU peak fits, and the host memory when --host-memory is given
  std::int64_t headroom_bytes = 0;      // gpu memory - peak (negative: short by that much)
  std::uint64_t host_bytes = 0;         // offloaded model state in CPU memory (per GPU's process)
  bool host_fits = true;
  std::uint64_t trainable_params = 0;   // what the optimizer updates, whole model (LoRA: the adapters)
  std::string pipeline_stage;           // with --pp: which stage holds the peak (the report's memory is its)
  // The GPU's whole memory (cudaMemGetInfo's total), kept when `gpu` is not copied: PyTorch sizes an
  // expandable segment's address space from it.
  std::uint64_t gpu_memory_bytes = 0;
  // Where the stack's allocator model is PyTorch's replay (allocator_model::pytorch_replay; replays_allocator), in
  // detailed evaluations, sweeps and charts: PyTorch's caching allocator replayed over three steps (planner/
  // allocator_trace.hpp) within what the budget leaves it: what it reserves from the device, its workspaces
  // included; 0 when not simulated. When it ran, the peak is the context plus this and the verdict is the
  // replay's (it fits when no allocation failed after the allocator freed its unused cached segments). When
  // it ran short (freed its cache, or failed even then), allocator->peak_reserved_bytes is the least memory,
  // in 2 MiB steps, in which the replay completes: below what the budget leaves it when it fits, above when
  // it does not.
  std::uint64_t allocator_reserved_bytes = 0;
  std::optional<allocator_replay> allocator;
  // Where the allocator is replayed: the buffer instances the replay would have made when they were too many to
  // replay (max_replayed_instances): the peak is then the estimate (tensors + slack), as for other allocator models.
  std::uint64_t allocator_replay_skipped_instances = 0;
  // Whether the replay makes PyTorch's two cuBLAS workspaces where PyTorch requests them rather than leaving
  // them to the overhead line (replay_makes_cublas_workspaces), set for every plan.
  bool cublas_workspaces_in_replay = false;
  // What the report says of the replay beside its peak, where the replay ran (add_allocator_details; the plan
  // command and the report ask for it, sweeps do not: one more replay):
  std::optional<std::uint64_t> loss_segment_bytes;  // with PyTorch's default allocator: hf_loss_segment_bytes
  std::optional<std::uint64_t> reserved_after_another_run_bytes;  // reserved_after_another_run
  // The run sits on an edge of the allocator: the two reserve at least allocator_edge_fraction apart.
  bool allocator_edge = false;

  step_flops flops;
  step_ops ops;  // what one GPU runs in a step, which the time is estimated from
  // The collectives of one GPU's step as its stack schedules them (empty on one GPU or without a cluster), and
  // why communication is not modelled where it is not ("": it is, or there is none).
  step_comm comm;
  std::string comm_not_modelled;
  step_time time;

  std::uint64_t category_bytes(tensor_category c) const {
    return timeline.category_bytes_at_peak[static_cast<int>(c)];
  }
  // Model state at the peak: weights, master weights, gradients and optimizer state.
  std::uint64_t model_state_bytes() const {
    return category_bytes(tensor_category::weights) + category_bytes(tensor_category::master_weights) +
           category_bytes(tensor_category::gradients) + category_bytes(tensor_category::optimizer);
  }
};

// What consecutive configurations of a sweep share, kept by the caller (one per thread) between calls of
// evaluate_plan. With one pipeline stage the inventory depends on the model and on every option of the
// run but the accumulation count, and the peak-only timeline on that count through whether it exceeds 1
// alone (planner/memory/timeline.cpp visits micro-batches 1 and 2). A sweep varies the accumulation innermost
// (planner/search/sweep.hpp), so nine configurations in ten take both from the one before. The model and facts
// it was filled for must stay where they are (a sweep_space holds them): they are matched by address.
struct plan_reuse {
  const model_spec* model = nullptr;
  const model_facts* facts = nullptr;
  run_config run;  // with grad_accum 0
  inventory inv;
  std::array<std::optional<timeline_result>, 2> timelines;  // accumulation 1, and more than 1
  std::optional<step_ops> micro_batch_ops;                   // the stack's micro_batch_ops
  // apply_allocator_replay's outcomes for this inventory (evaluate_point passes the reuse on). The replay's
  // schedule depends on the inventory, the facts and the run, which the reuse matches, and on the accumulation
  // only through min(grad_accum, 3) (allocator_schedule.cpp replays at most three micro-batches); its outcome,
  // bisection included, also on the budget, the fixed overhead (the capacity), the cuBLAS workspaces and the
  // GPU's memory (expandable segments' address space). An entry with all of those equal is the same replay:
  // a sweep's accumulations 3 and up replay once.
  struct replay_memo {
    std::uint64_t micro_batches = 0, budget_bytes = 0, fixed_bytes = 0, cublas_workspace_bytes = 0, gpu_memory_bytes = 0;
    std::optional<allocator_replay> allocator;
    std::uint64_t skipped_instances = 0;
  };
  std::vector<replay_memo> replays;
  // Compiled replay programs shared by content across the sweep's configurations (its worker's): see
  // planner/allocator/program_cache.hpp.
  program_cache* programs = nullptr;
};

struct plan_options {
  timeline_detail detail = timeline_detail::peak_and_live;
  const model_facts* facts = nullptr;  // describe_model(model), when the caller evaluates many runs of it
  // false: the result's model, gpu and calib stay empty. Sweeps and searches keep those in their space, and
  // copying their strings (sources, descriptions, aliases) costs several allocations a configuration.
  bool copy_specs = true;
  // Sweeps: the previous configuration's inventory and timeline, used when only the accumulation differs
  // (with detail == peak and one pipeline stage; ignored otherwise).
  plan_reuse* reuse = nullptr;
  // With detail == peak: the allocator replay all the same (charts: each point's peak is plan's).
  bool replay_at_peak = false;
};

// The most buffer instances an allocator replay makes (count_schedule_instances): Llama-3.1-405B's three steps
// with gradient accumulation (three micro-batches replayed a step) make 25,470 of them, about 200 a layer, and
// about 70 a layer without; ten times that is still no real model. The suggestions replay each candidate, so
// the report's time grows with the count: 5,000 layers (350,000 instances) took 31 s, 30,000 layers 136 s,
// and a million layers had taken 10.8 GB of host memory and not finished after 60 s; just under this limit a
// report takes about 4 s (3,500 layers of width 512). Beyond it the peak is the estimate.
inline constexpr std::uint64_t max_replayed_instances = 250'000;
// PyTorch's cuBLASLt workspace: CUBLASLT_WORKSPACE_SIZE, 1024 KiB unless set (aten/src/ATen/cuda/CublasHandlePool.cpp,
// parseCUDABlasLtWorkspaceSize), one per thread that runs a GEMM with a bias (planner/allocator/allocator_trace.hpp).
inline constexpr std::uint64_t pytorch_cublaslt_workspace_bytes = 1ull << 20;

// Whether the allocator replay applies to a run: a stack whose allocator model is PyTorch's replay
// (allocator_model::pytorch_replay), on one pipeline stage.
bool replays_allocator(const run_config& run);

// The peak (the tensors plus the overhead lines), and from it and the allocator replay (when it ran) the verdict
// and the headroom against the budget: what evaluate_plan and apply_allocator_replay end with.
void set_peak_and_verdict(plan_result& r, std::uint64_t budget_bytes);

// One segment of the loss's [b*s, V] fp32 buffers where PyTorch's cross entropy makes them (log_softmax's output and
// the gradients beside it), as PyTorch's default allocator sizes it: the replay's larger misses on measured runs were
// about one such segment made more or fewer in later steps (GPT-2 checkpointed under autocast, an fp32 Llama, a bf16
// TinyLlama: docs/accuracy.md, "How close it is"), so the report names its size as the replay's known error.
std::uint64_t hf_loss_segment_bytes(const model_spec& m, const run_config& run);

// Whether that replay makes PyTorch's two cuBLAS workspaces where PyTorch requests them, rather than leaving
// them to the overhead line: an allocator replayed (replays_allocator) over a forward written op by op, with
// PyTorch's default allocator (plan.cpp says why).
bool replay_makes_cublas_workspaces(const plan_result& r);

// What the same run reserves after another run in the same process (a notebook or a script that trains twice,
// as the shared measurement file's runs after its first were measured): PyTorch's cuBLAS workspaces are made already, so the replay makes
// none and they stay segments of their own (counted in). Where a request sits on an edge this moves a whole
// segment: GPT-2 checkpointed under autocast (s1024 b4) reserved 5.39 GiB in a process of its own and 4.65 GiB
// after another run. Set only where the replay makes
// the workspaces and completes without running short (nullopt otherwise); one more replay, so the plan command
// asks for it and sweeps do not.
std::optional<std::uint64_t> reserved_after_another_run(const plan_result& r, const model_facts& facts);
// How far apart the two must be for the report and plan check to name the edge: 1% of what the run reserves.
inline constexpr double allocator_edge_fraction = 0.01;

// Sets what the report says of r's replay (plan_result::loss_segment_bytes, reserved_after_another_run_bytes,
// allocator_edge) where it ran; nothing otherwise.
void add_allocator_details(plan_result& r, const model_facts& facts);

// The allocations and frees the allocator replay makes for r (planner/allocator/allocator_trace.hpp), with r's
// allocator (default or expandable segments), the GPU's memory and PyTorch's two cuBLAS workspaces.
allocator_schedule plan_allocator_schedule(const plan_result& r, const model_facts& facts, int steps = 3);

// Replays PyTorch's caching allocator for r (when replays_allocator) in the budget (the GPU's memory, or less
// with a safety margin) less the context and workspaces: sets r.allocator and r.allocator_reserved_bytes,
// and from them the peak, and the verdict and headroom against the budget. Where the allocator runs short
// there (it frees its unused cached segments to go on, or runs out), the peak is the least memory in which
// the replay completes, not the budget it filled with its cache. evaluate_plan does it unless asked for the
// peak only.
// With `reuse` (the one evaluate_plan just filled for r, in a sweep), an earlier configuration's outcome where
// it is the same replay (plan_reuse::replay_memo).
// With `programs` (or reuse->programs), the replay's program, and its outcome at this capacity, from
// configurations evaluated before with an equal schedule (planner/allocator/program_cache.hpp).
void apply_allocator_replay(plan_result& r, const model_facts& facts, std::uint64_t budget_bytes, plan_reuse* reuse = nullptr,
                            program_cache* programs = nullptr);

// For peak-only evaluations (sweeps, searches): the replay where it can change the verdict, when the
// tensors and the fixed overhead fit the budget (what the allocator reserves is never less than the tensor
// peak). Returns whether it ran; then r's peak and verdict are the fit check's.
bool confirm_with_allocator_replay(plan_result& r, const model_facts& facts, std::uint64_t budget_bytes,
                                   program_cache* programs = nullptr);

// Throws input_error for configurations that cannot run (e.g. bf16 on a GPU without bf16).
plan_result evaluate_plan(const model_spec& model, const run_config& run, const gpu_spec& gpu,
                          const calibration& calib, const plan_options& options = {});

}  // namespace trainplan
