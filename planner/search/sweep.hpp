#pragma once
// A sweep: the cross product of resolved axes, visited by index (mixed radix) so that a sweep of any size
// needs no memory beyond its axes. Axes from outer to inner: model, gpu, precision, grad dtype, optimizer,
// GPU layout (count and ZeRO stage), offload, fine-tuning, expandable segments, optimizer implementation,
// recompute, attention, dropout, sequence, micro-batch, accumulation (or global batch).
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/model/model_facts.hpp"
#include "planner/system/calibration.hpp"
#include "planner/system/gpu_spec.hpp"
#include "planner/memory/inventory.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/evaluate/plan.hpp"
#include "planner/run/run_config.hpp"

namespace trainplan {

struct sweep_model {
  model_spec spec;
  model_facts facts;
};

struct sweep_gpu {
  gpu_spec spec;
  calibration calib;
};

struct sweep_space {
  run_config base;  // what no axis varies: GPUs, ZeRO, tensor parallelism, offload, fine-tuning
  std::vector<sweep_model> models;
  std::vector<sweep_gpu> gpus;
  std::vector<precision_regime> precisions{precision_regime::bf16_mixed};
  std::vector<grad_dtype_choice> grad_dtypes{grad_dtype_choice::automatic};
  std::vector<optimizer_kind> optimizers{optimizer_kind::adamw};
  std::vector<recompute_mode> recomputes{recompute_mode::none};
  std::vector<attention_kind> attentions{attention_kind::flash};
  std::vector<double> dropouts;                  // empty: each model's own
  std::vector<std::uint64_t> seqs{4096};
  std::vector<std::uint64_t> micro_batches{1};
  std::vector<std::uint64_t> grad_accums{1};
  std::vector<std::uint64_t> global_batches;     // when set, accumulation = global / micro-batch
  // Axes `plan search --levers` widens (planner/search/search.hpp, widen_by_levers); empty: base's value.
  struct gpu_layout {
    std::uint64_t gpus = 1;
    int zero = 0;
    std::uint64_t ep = 1;  // expert parallelism (Mixture of Experts)
  };
  std::vector<gpu_layout> layouts;
  std::vector<offload_mode> offloads;
  std::vector<finetune_kind> finetunes;
  std::vector<optimizer_impl_kind> optimizer_impls;
  std::vector<bool> expandable_segments;  // PyTorch's expandable segments (--levers allocator); empty: the base's

  std::uint64_t size() const;  // throws input_error beyond 2^64

  struct point {
    const sweep_model* model = nullptr;
    const sweep_gpu* gpu = nullptr;
    run_config run;
    std::string error;  // the point cannot exist (a global batch that the micro-batch does not divide)
  };
  point at(std::uint64_t index) const;
  // The radix of each of an index's digits, innermost first, in at()'s order: accumulation, micro-batch,
  // sequence, dropout, attention, recomputation, optimizer implementation, expandable segments, fine-tuning,
  // offload, layout, optimizer, gradient dtype, precision, GPU, model (1 for an axis not swept).
  static constexpr std::size_t digit_count = 16;
  enum digit : std::size_t { accum_digit, micro_batch_digit, seq_digit, dropout_digit, attention_digit, recompute_digit,
                             optimizer_impl_digit, expandable_digit, finetune_digit, offload_digit, layout_digit,
                             optimizer_digit, grad_dtype_digit, precision_digit, gpu_digit, model_digit };
  std::array<std::uint64_t, digit_count> radices() const;
};

// One evaluated point: the plan, or why it has none.
struct sweep_result {
  sweep_space::point point;
  std::optional<plan_result> plan;
  std::string error;
};

// `reuse`: one per thread, carried from point to point (plan_reuse): consecutive points that differ in the accumulation
// alone share their inventory and timeline. `replay`: where the stack's allocator is replayed (replays_allocator),
// replay the caching allocator where it can change the verdict (confirm_with_allocator_replay), so that the row's peak
// and verdict are `plan`'s; about a millisecond each. Without it the peak is the estimate (tensors + context +
// workspaces + the calibrated slack), a thousand times faster.
sweep_result evaluate_point(const sweep_space::point& p, plan_reuse* reuse = nullptr, bool replay = false);

}  // namespace trainplan
