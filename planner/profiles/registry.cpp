#include "planner/profiles/registry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "planner/profiles/deepspeed/deepspeed_profile.hpp"
#include "planner/profiles/fsdp2/fsdp2_profile.hpp"
#include "planner/profiles/hf/hf_profile.hpp"
#include "planner/profiles/llmc/llmc_profile.hpp"
#include "planner/profiles/megatron/megatron_profile.hpp"
#include "planner/profiles/torchtune/torchtune_profile.hpp"
#include "planner/profiles/trainplan/trainplan_profile.hpp"
#include "planner/util/input_error.hpp"
#include "planner/util/names.hpp"

namespace trainplan {

// One line per stack: adding a stack adds its folder and its line here.
std::span<const stack_profile* const> all_profiles() {
  static const std::array<const stack_profile*, 7> profiles{&hf_profile(),        &fsdp2_profile(),
                                                            &deepspeed_profile(),  &torchtune_profile(),
                                                            &llmc_profile(),       &megatron_profile(),
                                                            &trainplan_profile()};
  return profiles;
}

const stack_profile& profile_named(std::string_view name, std::string_view option) {
  std::vector<std::string_view> names;
  for (const stack_profile* p : all_profiles()) {
    if (same_name(p->name, name)) return *p;  // any case, as every name users type (planner/util/names.hpp)
    names.push_back(p->name);
  }
  throw input_error(unknown_name_message(option, "framework", name, names));
}

std::string profile_names(std::string_view separator) {
  std::string out;
  for (const stack_profile* p : all_profiles()) {
    if (!out.empty()) out += separator;
    out += p->name;
  }
  return out;
}

const stack_profile& harness_profile() { return trainplan_profile(); }
const stack_profile& default_cli_profile(bool expert_parallel) { return expert_parallel ? megatron_profile() : hf_profile(); }
const stack_profile& unlabelled_report_profile() { return hf_profile(); }

const stack_profile& profile_of(const run_config& run) { return run.profile ? *run.profile : harness_profile(); }

namespace {

// What every stack refuses the same way, from its traits, then the stack's own checks.
void check_stack(const stack_profile& profile, const model_spec& m, const run_config& run, const precision_layout& layout) {
  if (run.cp > 1 && !profile.traits.context_parallel)
    throw input_error(fmt::format("--cp {}: --framework {} has no context parallelism", run.cp, profile.name));
  // torch.compile where the stack's compiled graphs are modelled (stack_profile::compile_scopes).
  if (run.compile != compile_scope::none && std::ranges::find(profile.compile_scopes, run.compile) == profile.compile_scopes.end()) {
    if (profile.compile_scopes.empty())
      throw input_error(fmt::format("--compile (torch.compile) is not modelled under --framework {}", profile.name));
    std::string offered;
    for (const compile_scope c : profile.compile_scopes)
      offered += fmt::format("{}--compile {}", offered.empty() ? "" : " or ", compile_scope_name(c));
    throw input_error(fmt::format("--compile {}: --framework {} is modelled with {}", compile_scope_name(run.compile),
                                  profile.name, offered));
  }
  profile.check(m, run, layout);
}

}  // namespace

void check_run(const model_spec& m, const run_config& run, const precision_layout& layout) {
  const stack_profile& profile = profile_of(run);
  try {
    check_stack(profile, m, run, layout);
  } catch (const input_error& refused) {
    std::string accepting;
    for (const stack_profile* other : all_profiles()) {
      if (other == &profile) continue;
      run_config elsewhere = run;
      elsewhere.profile = other;
      try {
        check_stack(*other, m, elsewhere, layout);
      } catch (const input_error&) {
        continue;
      }
      accepting += fmt::format("{}--framework {}", accepting.empty() ? "" : " or ", other->name);
    }
    if (accepting.empty()) throw;
    throw input_error(fmt::format("{} ({} models it)", refused.what(), accepting));
  }
}

inventory build_inventory(const model_spec& m, const run_config& run, const precision_layout& layout,
                          const model_facts* facts, const pipeline_stage& stage) {
  const stack_profile& profile = profile_of(run);
  check_run(m, run, layout);
  if (facts) return profile.build_inventory(m, run, layout, *facts, stage);
  return profile.build_inventory(m, run, layout, describe_model(m), stage);
}

step_ops list_step_ops(const model_spec& m, const run_config& run, const precision_layout& layout,
                       const trained_share& trained) {
  step_ops ops = profile_of(run).micro_batch_ops(m, run, layout, trained);
  repeat_micro_batches(ops, run.grad_accum);
  return ops;
}

}  // namespace trainplan
