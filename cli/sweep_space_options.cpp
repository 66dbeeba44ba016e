// `plan`'s options as a sweep space (sweep_space_options.hpp): each list or range an axis, each listed model
// resolved as `plan` resolves one.
#include "cli/sweep_space_options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "planner/model/model_facts.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/util/input_error.hpp"
#include "planner/util/sweep_axis.hpp"

namespace trainplan::cli {
namespace {

template <typename T, typename Parse>
std::vector<T> names_axis(const std::string& text, const char* option, Parse parse) {
  std::vector<T> out;
  for (const std::string& item : parse_name_axis(text, option)) out.push_back(parse(item));
  return out;
}

}  // namespace

sweep_space resolve_sweep_space(const model_run_args& args, std::vector<std::string>* notes) {
  sweep_space space;
  apply_parallel_options(args, space.base);
  space.base.profile = &chosen_profile(args);
  space.base.optimizer_impl = parse_optimizer_impl(args.optimizer_impl);
  space.base.expandable_segments = args.expandable_segments;
  // A stack that always shards unless told (as `plan` takes it: apply_framework_options).
  if (args.zero.empty() && args.fsdp.empty()) space.base.zero = space.base.profile->default_zero;
  apply_loss_options(args, space.base);
  // Models: resolve each listed one through the same path as `plan` (single values).
  std::vector<model_run_args> per_model;
  auto each = [&](const std::string& text, const char* option, std::string model_run_args::*field) {
    for (const std::string& item : parse_name_axis(text, option)) {
      model_run_args one = args;
      one.*field = item;
      per_model.push_back(one);
    }
  };
  if (!args.model.empty()) each(args.model, "--model", &model_run_args::model);
  else if (!args.params.empty()) each(args.params, "--params", &model_run_args::params);
  else if (!args.hf_config.empty() && std::filesystem::exists(args.hf_config)) per_model.push_back(args);  // one file, commas and all
  else if (!args.hf_config.empty()) each(args.hf_config, "--hf-config", &model_run_args::hf_config);
  else per_model.push_back(args);
  for (model_run_args& one : per_model) {
    // Run options are swept below; resolve the model with single placeholder run values.
    one.seq = "1";
    one.micro_batch = one.grad_accum = one.global_batch = "";
    one.framework = std::string(harness_profile().name);
    one.expandable_segments = false;
    one.precision = "bf16-mixed";
    one.grad_dtype = "auto";
    one.optimizer = "adamw";
    one.recompute = "none";
    one.attention = "flash";
    one.dropout = "";
    one.gpu = "h100";
    resolved_run r = resolve_model_run(one);
    if (notes) notes->insert(notes->end(), r.notes.begin(), r.notes.end());
    space.models.push_back({r.model, describe_model(r.model)});
  }

  const catalog data = catalog::load(args.data_dir.empty() ? std::nullopt : std::optional<std::filesystem::path>(args.data_dir));
  for (const std::string& name : parse_name_axis(args.gpu, "--gpu")) {
    const gpu_spec& g = data.gpu(name);
    space.gpus.push_back({g, data.calibration_for(g)});
  }
  space.precisions = names_axis<precision_regime>(precision_text(args), "--precision", parse_precision);
  space.grad_dtypes = names_axis<grad_dtype_choice>(args.grad_dtype, "--grad-dtype", parse_grad_dtype);
  space.optimizers = names_axis<optimizer_kind>(args.optimizer, "--optimizer", parse_optimizer);
  space.recomputes = names_axis<recompute_mode>(recompute_text(args), "--recompute", parse_recompute);
  space.attentions = names_axis<attention_kind>(args.attention, "--attention", parse_attention);
  if (!args.dropout.empty()) space.dropouts = parse_probability_axis(args.dropout, "--dropout");
  if (!args.seq.empty()) {
    space.seqs = parse_count_axis(args.seq, "--seq");
  } else {  // as `plan` assumes (cli/model_run_options.cpp): 4096, capped by the learned positions of every model
    std::uint64_t seq = 4096;
    for (const sweep_model& m : space.models)
      if (m.spec.max_positions > 0) seq = std::min<std::uint64_t>(seq, m.spec.max_positions);
    space.seqs = {seq};
    if (notes) notes->push_back(fmt::format("--seq not given: assumed {}", seq));
  }
  if (!args.micro_batch.empty()) space.micro_batches = parse_count_axis(args.micro_batch, "--micro-batch");
  if (!args.global_batch.empty()) {
    if (!args.grad_accum.empty()) throw input_error("give --grad-accum or --global-batch, not both, in a sweep");
    space.global_batches = parse_count_axis(args.global_batch, "--global-batch");
  } else if (!args.grad_accum.empty()) {
    space.grad_accums = parse_count_axis(args.grad_accum, "--grad-accum");
  }
  space.size();  // rejects sweeps beyond 2^64 configurations here, with its message
  return space;
}

}  // namespace trainplan::cli
