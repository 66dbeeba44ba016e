#pragma once
// Measurements of real training runs in the collector's format (scripts/collect_hf.py; the shared H100
// file tests/data/measurements/pytorch-hf-h100-2026-11-22.jsonl): one JSON object a line, the first
// describing the machine ("id": "env"), each other one configuration with its measured memory and time.
// Read into the planner's terms, so that `plan check` and the tests predict each run with the stack it measured.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/model/model_spec.hpp"
#include "planner/run/run_config.hpp"
#include "planner/system/collective.hpp"

namespace trainplan {

// One segment the caching allocator held after the measured steps (torch.cuda.memory_snapshot()).
struct measured_segment {
  bool small_pool = false;  // "small" (requests up to 1 MiB) or "large"
  std::uint64_t bytes = 0;
};

// The caching allocator's counters after the measured steps (collect_hf.py's "allocator_counts", from
// torch.cuda.memory_stats()); each only when the report has it.
struct measured_allocator_counts {
  std::optional<std::uint64_t> device_allocs;  // num_device_alloc: cudaMalloc calls, one a segment
  std::optional<std::uint64_t> device_frees;   // num_device_free: cudaFree calls
  std::optional<std::uint64_t> alloc_retries;  // num_alloc_retries: a failed cudaMalloc freed the cache, tried again
  std::optional<std::uint64_t> ooms;           // num_ooms
  bool any() const { return device_allocs || device_frees || alloc_retries || ooms; }
};

// One extra step profiled on the GPU (collect_hf.py --profile, torch.profiler's CUDA activity): what the GPU
// ran, apart from the host. Absent without --profile, or when the profiler failed ({"error": ...}).
struct measured_gpu_profile {
  double busy_seconds = 0;  // busy_s: the union of the kernels' intervals
  std::uint64_t kernels = 0;  // kernels launched in the step (memcpy and memset apart)
};

// A run on several GPUs (collect_hf.py --parallel, its "parallel" object): the mode as the report names it, which
// the reader turns into the run's --gpus, --zero and --tp (fully_shard: ZeRO-3; ddp: 0; zero1: 1; tp: --tp N).
struct measured_layout {
  std::string mode;                // "fully_shard", "ddp", "zero1" or "tp"
  std::uint64_t world_size = 1, rank = 0;
  bool fake_process_group = false;  // PyTorch's fake group: per-rank memory, collectives that took no time
  std::uint64_t nodes = 0, gpus_per_node = 0;  // under torchrun (0: not recorded, the fake group)
};

// One collective of a profiled step under the real process group (collect_hf.py's "collectives"): the NCCL kernels
// of one kind, size and communicator. Kinds the planner does not time (broadcast, reduce) and kernels without their
// sizes are counted in measured_run::collectives_left_out, not kept.
struct measured_collective {
  collective coll = collective::all_reduce;
  double message_bytes = 0;  // nccl-tests' size (planner/system/collective.hpp)
  std::uint64_t ranks = 0, nodes = 0;
  std::uint64_t calls = 0;
  double seconds = 0;  // the median kernel time of one call
};

struct measured_run {
  std::string id;
  model_spec model;
  run_config run;
  std::uint64_t params = 0;               // as the collector counted them
  std::uint64_t alloc_peak_bytes = 0;     // max_memory_allocated() over the step: the tensor peak
  std::uint64_t reserved_peak_bytes = 0;  // max_memory_reserved() over the run
  double step_seconds = 0;
  bool out_of_memory = false;
  // false for a step time measured without the memory figures (neither alloc_peak nor reserved_peak given:
  // a published or quoted step time), which only the step-time comparison and fit use
  bool memory_measured = true;
  // The segments behind reserved_peak, when the collector listed them ("segments"; empty otherwise).
  std::vector<measured_segment> segments;
  measured_allocator_counts allocator_counts;  // also on an out-of-memory line
  std::optional<measured_gpu_profile> gpu_profile;
  // The training stack of this run (its line's "stack"), over the env line's; nullptr: the file's.
  const stack_profile* stack = nullptr;
  std::optional<measured_layout> layout;  // several GPUs; nullopt: one
  // false where the step time is no measurement of the run planned ("time_comparable": false, as under the fake
  // process group): memory only.
  bool time_comparable = true;
  // Run under torch.compile (collect_hf.py --compile, "compile": true): predicted with run_config::compile; a
  // compiled run the stack does not model is listed as not predicted, with the stack's reason.
  bool compiled = false;
  std::vector<measured_collective> collectives;
  std::uint64_t collectives_left_out = 0;
};

struct measured_file {
  std::string gpu, torch, transformers;   // from the env line
  // The host's CPU ("host_cpu": /proc/cpuinfo's model name, with "host_cpus" logical CPUs), where the report
  // says: the step's host time depends on it. Empty in reports from before the field.
  std::string host_cpu;
  std::uint64_t context_bytes = 0;        // CUDA context less PyTorch's reserved bytes
  std::uint64_t gpu_total_bytes = 0;      // cudaMemGetInfo's total
  const stack_profile* stack = nullptr;   // the training stack measured: the env line's "stack", or the collector's
  std::vector<measured_run> runs;
};

// Throws input_error naming the file, the line and the field for anything malformed or missing.
measured_file parse_measurements(std::string_view text, const std::string& file_name);

// The attention as the collector's "attn" names it, transformers' attn_implementation: "eager", "sdpa"
// (attention_kind::flash) or "flash_attention_2"; what `plan check` prints for a run.
std::string_view attn_implementation_name(attention_kind a);

// The file's runs were measured one after another in one process (the shared file, which does not say so:
// its one env line and its first run's segments, byte for byte those of that run in a process of its own, do): every run after
// the first found the cuBLAS workspaces the first made (run_config::cublas_workspaces_held).
void mark_one_process(measured_file& f);

}  // namespace trainplan
