#pragma once
// Training steps on the harness: gradient accumulation over micro-batches (the loss gradient scaled by
// 1/accumulation), the precision regimes bf16-mixed, fp32 and fp16-mixed (dynamic loss scaling: a step
// with inf/NaN gradients is skipped and the scale halved, as torch.cuda.amp.GradScaler), optional fp32
// gradient accumulation, and AdamW whose state appears at the first optimizer step.
#include <cstdint>
#include <vector>

#include "kernels/adamw.hpp"
#include "kernels/ops_table.hpp"
#include "planner/memory/inventory.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"
#include "validate/model_state.hpp"
#include "validate/tracking_allocator.hpp"
#include "validate/transformer.hpp"

namespace trainplan::validate {

struct training_options {
  int steps = 2;                   // step 2 is the first with optimizer state: the steady-state peak
  std::uint64_t seed = 1234;
  kernels::adamw_config adamw;
  float initial_loss_scale = 65536.0f;  // GradScaler's default init_scale, 2^16
  int loss_scale_growth_interval = 2000;
};

struct step_record {
  int step = 0;          // 1-based
  double loss = 0;       // mean over the step's micro-batches
  bool skipped = false;  // fp16: non-finite gradients
  float loss_scale = 1;  // the scale used in this step
};

// Throws input_error for what the harness does not implement (it names the supported set).
void check_harness_supports(const model_spec& m, const run_config& run);

class training_run {
 public:
  training_run(const model_spec& m, const run_config& run, const training_options& options = {},
               const kernels::kernel_ops& ops = kernels::cpu_kernel_ops());

  step_record step();  // one optimizer step: all micro-batches, then the update
  void run();          // options.steps steps, and more while the steady state is not reached (below)

  // The planner's steady state ("step 2 and later") is a step after the first update, which creates AdamW's
  // state. Under fp16 a skipped update (GradScaler: non-finite gradients) creates none, so the run needs at
  // least one step after its first applied one before its peak is the planner's; this many more steps at most.
  static constexpr int max_extra_steps = 32;  // the scale halves from 2^16 past 1 in 17
  bool reached_steady_state() const;
  int first_applied_step() const;  // 1-based; 0 while every step so far was skipped

  const model_spec model;
  const run_config config;
  const precision_layout layout;
  const training_options options;
  tracking_allocator alloc;
  model_state state;
  const inventory buffers;  // the planner's inventory of this run (the harness's profile's): what it allocates
  transformer net;
  std::vector<step_record> records;

 private:
  float loss_scale_;
  int good_steps_ = 0;
};

}  // namespace trainplan::validate
