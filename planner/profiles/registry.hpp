#pragma once
// Every training stack the planner models, registered once (planner/profiles/registry.cpp), and the lookups
// the rest of the planner and the command line use instead of asking which stack a run uses.
#include <span>
#include <string>
#include <string_view>

#include "planner/profiles/profile.hpp"

namespace trainplan {

// Every registered profile, in the order --help lists them.
std::span<const stack_profile* const> all_profiles();
// The profile of that name; throws input_error naming the option and the known names (and the closest one).
const stack_profile& profile_named(std::string_view name, std::string_view option = "--framework");
// "hf | llmc | megatron | trainplan": for --help and error messages.
std::string profile_names(std::string_view separator = " | ");

// The stack a run_config built in code means when it names none: this project's harness, so that such a run is
// what `plan validate` trains. The command line names its own default (default_cli_profile).
const stack_profile& harness_profile();
// What `plan` predicts when --framework is not given: PyTorch + Hugging Face, what most people run; or, where
// expert parallelism is asked for (Hugging Face's MoE blocks have none), Megatron-Core, which shards experts.
const stack_profile& default_cli_profile(bool expert_parallel = false);
// The stack of reports written before collector reports named theirs: scripts/collect_hf.py's.
const stack_profile& unlabelled_report_profile();

// The run's stack's own checks (stack_profile::check): where it refuses the run, the input_error it throws
// names the stacks that accept the same run, if any ("(--framework megatron models it)").
void check_run(const model_spec& m, const run_config& run, const precision_layout& layout);

// The run's profile: run.profile, or the harness's when it names none.
const stack_profile& profile_of(const run_config& run);

// The step's inventory as the run's stack lays it out, after the stack's own checks (which throw input_error
// for what it cannot train). `facts`: what this GPU holds of `m` (describe_model(m) when not given).
inventory build_inventory(const model_spec& m, const run_config& run, const precision_layout& layout,
                          const model_facts* facts = nullptr, const pipeline_stage& stage = {});
// The operations of a whole step as the run's stack runs them: its micro_batch_ops, repeated for the run's
// accumulation (planner/time/step_ops.hpp).
step_ops list_step_ops(const model_spec& m, const run_config& run, const precision_layout& layout,
                       const trained_share& trained);

}  // namespace trainplan
