#pragma once
// The layout search for a fixed number of GPUs (`plan search --gpus N`): every way the run's stacks can lay a
// model over them (data x tensor x pipeline x expert parallelism, ZeRO stage, recomputation, micro-batch, with the
// accumulation that reaches the target global batch), tensor parallelism kept inside a node, each evaluated as the
// fit check evaluates (communication on the GPU's cluster included) and ranked by tokens/s.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "planner/evaluate/plan.hpp"
#include "planner/profiles/profile.hpp"

namespace trainplan {

// What a layout's step time goes to, for the listing: the largest part names what to change first.
enum class step_share : std::uint8_t { compute, pipeline_bubble, optimizer, offload, communication };
std::string_view step_share_name(step_share s);  // "compute"

struct layout_row {
  run_config run;
  std::uint64_t peak_bytes = 0;
  std::uint64_t budget_bytes = 0;
  bool fits = false;
  double tokens_per_second = 0, mfu = 0, step_seconds = 0;
  double communication_seconds = 0;          // every collective, end to end
  double exposed_communication_seconds = 0;  // what the step waits for, the SM slowdown included
  std::array<double, comm_group_count> exposed_by_group{};
  step_share dominant = step_share::compute;
  comm_group dominant_group = comm_group::data;  // with dominant == communication: the group that waits most
};

struct layout_search_options {
  std::uint64_t target_tokens_per_step = 4ull << 20;
  double margin = 0.05;        // memory kept free, a fraction of the GPU
  std::uint64_t max_micro_batch = 16;
  // The stacks to try: the run's own when given, else every stack that trains several GPUs (the harness's aside).
  std::vector<const stack_profile*> stacks;
  // Called after each evaluated layout (done, total), for progress on long searches.
  std::function<void(std::uint64_t, std::uint64_t)> progress;
};

struct layout_search_result {
  std::vector<layout_row> fitting;  // best first: tokens/s, then lower peak
  std::vector<layout_row> failing;  // over the budget, lowest peak first
  std::uint64_t evaluated = 0, invalid = 0, unreachable = 0;
  std::string first_invalid_reason;
};

// The tensor-parallel degrees to try: powers of two up to the GPUs of a node (the GPU's cluster; 8 without one)
// that divide the attention and key/value heads; the pipeline degrees: divisors of the layers; the expert
// degrees (MoE): powers of two dividing the experts; ZeRO 0-3; recomputation none, selective (where the stack
// offers it) and full; micro-batches 1, 2, 4... up to max_micro_batch. `base` gives everything else (precision,
// optimizer, sequence, GPUs). A layout a stack refuses counts as invalid; one whose batch cannot reach the target
// exactly as unreachable.
layout_search_result search_layouts(const model_spec& model, const run_config& base, const gpu_spec& gpu,
                                    const calibration& calib, const layout_search_options& options);

}  // namespace trainplan
