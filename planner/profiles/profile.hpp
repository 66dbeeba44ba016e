#pragma once
// A training stack as the planner models it: one registration (a stack_profile, as ggml registers a backend)
// gives its name, its defaults, what it can train, the inventory of a step (what it saves and allocates), its
// allocator and runtime overheads, the operations a step runs, and the calibration it reads. Everything the
// planner says differs from stack to stack is here; no code outside planner/profiles/ asks which stack a run
// uses. Adding a stack is a folder under planner/profiles/, its line in planner/profiles/registry.cpp, its data
// and its tests (docs/architecture.md).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "planner/memory/inventory.hpp"
#include "planner/model/model_facts.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/run/pipeline.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"
#include "planner/run/stack_traits.hpp"
#include "planner/system/calibration.hpp"
#include "planner/time/communication.hpp"
#include "planner/time/step_ops.hpp"

namespace trainplan {

// Where a stack's tensors come from, which decides what the GPU holds beyond them.
enum class allocator_model {
  cuda_malloc,       // a few large blocks straight from cudaMalloc (llm.c): nothing cached, no slack
  calibrated_slack,  // a caching allocator whose unused cache is a calibrated fraction of the tensor peak
  pytorch_replay,    // PyTorch's caching allocator, replayed over the step's allocations (planner/allocator/)
};

// What the optimizer updates on one GPU, for the step's operations: parameters and tensors (ZeRO shards them,
// tensor and pipeline parallelism split them, LoRA trains only the adapters), and the bytes one update reads
// and writes (planner/evaluate/plan.cpp counts them from the inventory).
struct trained_share {
  double params = 0;
  double tensors = 0;
  double optimizer_bytes = 0;
};

// The fixed bytes a stack's process holds beyond its tensors (the allocator's slack is the allocator model's).
struct stack_overhead {
  std::uint64_t cuda_context_bytes = 0;
  std::uint64_t cublas_workspace_bytes = 0;  // every workspace it keeps, all handles together
};

struct stack_profile {
  // ---- identity ----------------------------------------------------------------------------------------
  std::string_view name;        // what --framework takes and data/calibration.json's "profiles" keys name
  std::string_view title;       // "PyTorch eager + Hugging Face transformers"
  std::string_view assumption;  // the report's line on what the profile models

  // ---- defaults and what it can train -----------------------------------------------------------------------
  // The precision a user of the stack gets without asking (lora: LoRA adapters train).
  precision_regime (*default_precision)(bool lora) = nullptr;
  recompute_mode default_recompute = recompute_mode::none;
  std::string_view recompute_help = {};  // how the stack names its recomputation modes, for --help ("" : ours)
  bool offers_selective_recompute = true;  // false: it recomputes whole layers or nothing
  bool runs_model_dropout = true;   // false: the stack has no dropout, a model's default is taken as 0
  // Throws input_error for a run the stack cannot train, naming what it cannot do.
  void (*check)(const model_spec& m, const run_config& run, const precision_layout& layout) = nullptr;
  // Options of PyTorch's that only a stack built on its eager runtime offers: the AdamW flavour (foreach or
  // fused) and the caching allocator's expandable segments; fp8 training through the stack itself.
  bool offers_optimizer_impl = false;
  bool offers_expandable_segments = false;
  // LoRA through peft: its options (--lora-dtype, --lora-dropout) describe it.
  bool lora_through_peft = false;
  // Its model code is Hugging Face transformers' modules, loaded with from_pretrained (which takes the
  // attention implementation and dtype that no engine config holds).
  bool hugging_face_modules = false;

  // ---- how it stores and runs the model ---------------------------------------------------------------------
  stack_traits traits;
  // What torch.compile (--compile) can cover under it, the first what a bare --compile means; empty: --compile is
  // refused (check_run says so for every stack alike).
  std::span<const compile_scope> compile_scopes = {};
  // The losses beyond the standard one (--loss) that are the stack's own, not another library's it would have to
  // take up: a suggestion of one costs nothing (torchtune's chunked cross-entropy under torchtune).
  std::span<const loss_kind> own_losses = {};

  // ---- memory ------------------------------------------------------------------------------------------------
  // The step's inventory on one GPU. `facts` describe what this GPU holds of `m` (describe_model, or a pipeline
  // stage's share); `stage` the pipeline stage (the defaults: the only one).
  inventory (*build_inventory)(const model_spec& m, const run_config& run, const precision_layout& layout,
                               const model_facts& facts, const pipeline_stage& stage) = nullptr;
  allocator_model allocator = allocator_model::calibrated_slack;
  stack_overhead (*overhead)(const calibration& calib) = nullptr;
  // The unused cache, as a fraction of the tensor peak, where the allocator model is calibrated_slack.
  double (*slack_fraction)(const calibration& calib) = nullptr;

  // ---- time ----------------------------------------------------------------------------------------------------
  // One micro-batch's forward and backward and the optimizer step once (planner/time/step_ops.hpp
  // repeat_micro_batches multiplies them out).
  step_ops (*micro_batch_ops)(const model_spec& m, const run_config& run, const precision_layout& layout,
                              const trained_share& trained) = nullptr;
  // How the gradients the optimizer reads come to be: one buffer from the first backward of a step (false), or
  // PyTorch's .grad of each parameter, made by its own backward (the timeline's and the report's wording).
  bool grads_per_parameter = false;

  // The collectives of one step on one GPU as the stack schedules them (planner/time/communication.hpp), for a run
  // on several GPUs; nullptr: none (one GPU).
  step_comm (*communication)(const model_spec& m, const run_config& run, const precision_layout& layout,
                             const model_facts& facts) = nullptr;

  // ---- the report -----------------------------------------------------------------------------------------------
  // Lines for the report's assumptions beyond `assumption`, for this run (which attention kernel, adapters...);
  // nullptr: none.
  void (*describe)(const model_spec& m, const run_config& run, const precision_layout& layout,
                   std::vector<std::string>& lines) = nullptr;
  // Where its runtime overhead's figures come from, for the report.
  std::string (*overhead_note)(const calibration& calib) = nullptr;

  // ---- calibration -----------------------------------------------------------------------------------------------
  // The keys of its entry under "profiles" in data/calibration.json that it reads (beyond "timing", which
  // every profile has): cuda_context_bytes, allocator_slack_fraction.
  std::vector<std::string_view> calibration_keys;
  // The stack whose calibration this one's runtime shares (FSDP2 and DeepSpeed run Hugging Face's modules in the
  // same PyTorch process as its eager training: its CUDA context, workspaces and launch costs); nullptr: its own.
  const stack_profile& (*calibrated_as)() = nullptr;

  // ---- many GPUs ---------------------------------------------------------------------------------------------------
  // The ZeRO stage a run on several data-parallel GPUs gets when none is asked for (FSDP2: 3, fully_shard's
  // resharding after forward).
  int default_zero = 0;
};

// The name of the entry under "profiles" in data/calibration.json that a stack's figures come from.
inline std::string_view calibration_name(const stack_profile& p) { return p.calibrated_as ? p.calibrated_as().name : p.name; }

}  // namespace trainplan
