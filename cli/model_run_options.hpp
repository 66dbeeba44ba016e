#pragma once
// The model, run and GPU options shared by `plan` and its subcommands, as typed, and their resolution
// into planner structures. Numbers are taken as strings and parsed by the planner so that every bad
// value gets the same kind of one-line message.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/cluster_options.hpp"
#include "planner/io/catalog.hpp"
#include "planner/profiles/profile.hpp"
#include "planner/system/calibration.hpp"
#include "planner/system/gpu_spec.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/run/run_config.hpp"

namespace trainplan::cli {

struct model_run_args {
  std::string model, params, hf_config;
  std::string family, layers, hidden, heads, kv_heads, ffn, vocab, experts, experts_per_token;
  std::string seq, micro_batch, grad_accum, global_batch;
  std::string framework, optimizer_impl = "foreach";  // framework: empty = the default stack (chosen_profile)
  bool framework_given = false;  // --framework on the command line
  bool expandable_segments = false;
  std::string precision, grad_dtype = "auto", optimizer = "adamw";  // precision: empty = the framework's default
  std::string recompute, attention = "flash", dropout;  // recompute: empty = the framework's default
  std::string loss = "standard", loss_chunks;           // loss_chunks: empty = the loss's default
  std::string packing;                                  // --packing DOC_TOKENS; empty: off
  std::string compile;                                  // --compile[=SCOPE] (empty: not given)
  std::string gpu = "h100";
  bool gpu_given = false;  // --gpu on the command line (--cluster names a GPU too)
  cluster_args cluster;
  std::string data_dir;
  // Beyond one GPU, and fine-tuning (single values, also in sweeps).
  std::string gpus, tp, cp, pp, vpp, ep, capacity_factor, zero, fsdp, offload, host_memory, finetune, lora_rank, lora_targets, lora_dtype,
      lora_dropout;
  bool sequence_parallel = false;
};

void add_model_run_options(CLI::App& app, model_run_args& args);

struct resolved_run {
  catalog data;
  model_spec model;
  run_config run;
  gpu_spec gpu;
  calibration calib;
  std::optional<cluster_choice> cluster;  // the cluster and the run's nodes; nullopt: communication not modelled
  std::vector<std::string> notes;  // how the shape and defaults were chosen, for the report
};

resolved_run resolve_model_run(const model_run_args& args);  // throws input_error

// The training stack asked for: --framework, or the default stack for what the options ask (one that shards
// experts when --ep > 1 names none: planner/profiles/registry.hpp default_cli_profile).
const stack_profile& chosen_profile(const model_run_args& args);
// The stack, its AdamW implementation, and the precision (the stack's default when not given).
void apply_framework_options(const model_run_args& args, run_config& run);
// The precision text to parse: --precision as given, else the framework's default regime's name.
std::string precision_text(const model_run_args& args);
// Likewise for --recompute: as given, else the stack's default (stack_profile::default_recompute).
std::string recompute_text(const model_run_args& args);

// The loss (--loss, --loss-chunks), --packing and --compile onto a run whose stack is set (a bare --compile is the
// stack's own scope); throws input_error.
void apply_loss_options(const model_run_args& args, run_config& run);
// The parallelism, offload and fine-tuning options onto a run (throws input_error).
void apply_parallel_options(const model_run_args& args, run_config& run);

// The names of the registered stacks for which `holds` is true, ", "-separated in --help's order: for a help text
// that says which stacks an option applies to, read from their profiles rather than written out.
std::string profiles_where(const std::function<bool(const stack_profile&)>& holds);
// The same for one of the profile's flags (offers_expandable_segments, lora_through_peft...).
std::string profiles_offering(bool stack_profile::*offers);

}  // namespace trainplan::cli
