// The options shared by `plan` and its subcommands (model_run_options.hpp): their help, whose lists of stacks
// come from the registered profiles, and their resolution into a model, a run and a GPU.
#include "cli/model_run_options.hpp"

#include <fmt/format.h>

#include "planner/profiles/registry.hpp"
#include "planner/util/checked_math.hpp"
#include "planner/io/hf_cache.hpp"
#include "planner/io/hf_config.hpp"
#include "planner/io/model_by_name.hpp"
#include "planner/util/input_error.hpp"
#include "planner/util/quantity_parse.hpp"
#include "planner/io/shape_from_params.hpp"

namespace trainplan::cli {

namespace {

// Every registered stack as "NAME (TITLE)", " | "-separated, the default marked, and the default with --ep.
std::string framework_help() {
  std::string list;
  for (const stack_profile* p : all_profiles()) {
    if (!list.empty()) list += " | ";
    list += fmt::format("{} ({}{})", p->name, p->title, p == &default_cli_profile() ? ", the default" : "");
  }
  return fmt::format("the training stack whose memory and time are predicted: {}; with --ep above 1 and none named: {}",
                     list, default_cli_profile(true).name);
}

std::string precision_help() {
  std::string defaults;
  for (const stack_profile* p : all_profiles()) {
    const precision_regime full = p->default_precision(false), lora = p->default_precision(true);
    if (!defaults.empty()) defaults += ", ";
    defaults += fmt::format("{} for {}", precision_name(full), p->name);
    if (lora != full) defaults += fmt::format(" ({} with --finetune lora: a base loaded in {})", precision_name(lora), precision_name(lora));
  }
  return fmt::format("{} (default: the stack's: {})", precision_names(" | "), defaults);
}

std::string recompute_help() {
  std::string notes;
  for (const stack_profile* p : all_profiles())
    if (!p->recompute_help.empty()) notes += fmt::format("; {}", p->recompute_help);
  return fmt::format("none | selective | full (default none{})", notes);
}

}  // namespace

std::string profiles_where(const std::function<bool(const stack_profile&)>& holds) {
  std::string names;
  for (const stack_profile* p : all_profiles())
    if (holds(*p)) names += (names.empty() ? "" : ", ") + std::string(p->name);
  return names;
}

std::string profiles_offering(bool stack_profile::*offers) {
  return profiles_where([offers](const stack_profile& p) { return p.*offers; });
}

void add_model_run_options(CLI::App& app, model_run_args& a) {
  const char* model_group = "Model (one of --model, --params, --hf-config, or a shape)";
  app.add_option("--model,-m", a.model, "preset name or its Hugging Face repository id, e.g. meta-llama/Llama-3.1-8B (see `plan models`)")->type_name("NAME")->group(model_group);
  app.add_option("--params,-p", a.params, "parameter count such as 7B, 1.5B or 7e9: a preset of that size, else a derived shape")
      ->type_name("COUNT")->group(model_group);
  app.add_option("--hf-config", a.hf_config, fmt::format("Hugging Face config.json, or a model's folder holding one ({})", supported_hf_model_types))->type_name("FILE|DIR")->group(model_group);
  const char* shape_group = "Shape (overrides the chosen model, or defines one)";
  app.add_option("--family", a.family, "gpt or llama (default llama for a shape given from scratch)")->type_name("gpt|llama")->group(shape_group);
  app.add_option("--layers", a.layers, "transformer layers L")->type_name("N")->group(shape_group);
  app.add_option("--hidden", a.hidden, "hidden size h")->type_name("N")->group(shape_group);
  app.add_option("--heads", a.heads, "attention heads a")->type_name("N")->group(shape_group);
  app.add_option("--kv-heads", a.kv_heads, "key/value heads (grouped-query attention; default: heads)")->type_name("N")->group(shape_group);
  app.add_option("--ffn", a.ffn, "MLP width (default 4h for gpt, 8h/3 rounded up to 256 for llama)")->type_name("N")->group(shape_group);
  app.add_option("--vocab", a.vocab, "vocabulary size V")->type_name("N")->group(shape_group);
  app.add_option("--experts", a.experts, "llama family: a Mixture of Experts of N routed experts, each a SwiGLU of width --ffn "
                                         "(0: a dense MLP)")->type_name("N")->group(shape_group);
  app.add_option("--experts-per-token", a.experts_per_token, "MoE: experts each token is routed to, top-k (1 to --experts)")
      ->type_name("K")->group(shape_group);
  const char* run_group = "Run";
  app.add_option("--seq,-s", a.seq, "sequence length in tokens; k = 1024 (default 4096, capped by learned positions)")
      ->group(run_group);
  app.add_option("--micro-batch,-b", a.micro_batch, "sequences per forward/backward pass (default 1)")->type_name("N")->group(run_group);
  app.add_option("--grad-accum", a.grad_accum, "micro-batches per optimizer step (default 1)")->type_name("N")->group(run_group);
  app.add_option("--global-batch", a.global_batch, "sequences per optimizer step over all GPUs; sets --grad-accum = global / (micro x data-parallel)")
      ->group(run_group);
  app.add_option("--framework", a.framework, framework_help())
      ->type_name("NAME")->group(run_group)->each([&a](const std::string&) { a.framework_given = true; });
  app.add_option("--optimizer-impl", a.optimizer_impl,
                 fmt::format("PyTorch's AdamW flavour (--framework {}): foreach (default) | fused", profiles_offering(&stack_profile::offers_optimizer_impl)))
      ->type_name("IMPL")->group(run_group);
  app.add_flag("--expandable-segments", a.expandable_segments,
               fmt::format("PyTorch's allocator with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (--framework {}: segments "
                           "grow by mapping pages instead of new cudaMalloc'd segments: less fragmentation)",
                           profiles_offering(&stack_profile::offers_expandable_segments)))
      ->group(run_group);
  app.add_option("--precision", a.precision, precision_help())
      ->type_name("REGIME")->group(run_group);
  app.add_option("--grad-dtype", a.grad_dtype, "auto | fp32 (adds an fp32 gradient accumulation buffer)")->type_name("DTYPE")->group(run_group);
  app.add_option("--optimizer", a.optimizer, "adamw | sgd | sgd-momentum | adafactor | adamw-8bit | lion (default adamw)")
      ->type_name("NAME")->group(run_group);
  app.add_option("--recompute", a.recompute, recompute_help())->type_name("MODE")->group(run_group);
  app.add_option("--attention", a.attention,
                 "flash | sdpa | flash_attention_2 | eager (default flash: a tiled kernel, under the stacks that load "
                 "transformers' modules PyTorch's SDPA, also named sdpa; flash_attention_2: the flash-attn package there)")
      ->type_name("KIND")->group(run_group);
  app.add_option("--loss", a.loss,
                 "standard | chunked | fused-linear (default standard: the whole logits upcast to fp32; chunked: "
                 "torchtune's chunked output and cross-entropy; fused-linear: Liger's fused linear cross-entropy, no "
                 "logits kept)")
      ->type_name("KIND")->group(run_group);
  app.add_option("--loss-chunks", a.loss_chunks, "with --loss chunked: the chunks of the sequence (default 8, torchtune's)")
      ->type_name("N")->group(run_group);
  app.add_option("--packing", a.packing,
                 "documents of DOC_TOKENS packed into each row of --seq tokens, attention within each (TRL's packing; "
                 "the stacks that run transformers' modules, --attention sdpa or flash_attention_2; default off)")
      ->type_name("DOC_TOKENS")->group(run_group);
  app.add_option("--compile", a.compile,
                 "torch.compile (the stacks that model it; what its partitioner saves and Inductor's fused kernels, "
                 "derived from the partitioner's rules, not measured). SCOPE: default (the stack's own: model for Hugging "
                 "Face's Trainer, layers+loss for torchtune's recipes), model (the whole model and its loss, as the Trainer's torch_compile), "
                 "layers (each decoder layer apart, the rest eager: accelerate's regional compilation), layers+loss (each "
                 "layer and the loss apart: torchtune's compile_model and compile_loss)")
      ->expected(0, 1)->default_str("default")->type_name("[SCOPE]")->group(run_group);
  app.add_option("--dropout", a.dropout, "dropout probability (default: the model's)")->type_name("P")->group(run_group);
  const char* par_group = "Several GPUs, offload, fine-tuning";
  app.add_option("--gpus", a.gpus, "GPUs in all: data parallel x --tp x --cp x --pp (default 1)")->type_name("N")->group(par_group);
  app.add_option("--zero", a.zero, "ZeRO stage over the data-parallel GPUs: 0 (DDP), 1 optimizer, 2 +gradients, 3 +weights")
      ->type_name("STAGE")->group(par_group);
  app.add_option("--fsdp", a.fsdp, "FSDP in its own words: full (= ZeRO-3) or grad-op (= ZeRO-2)")->type_name("MODE")->group(par_group);
  app.add_option("--tp", a.tp, "tensor-parallel degree (default 1)")->type_name("N")->group(par_group);
  app.add_flag("--sequence-parallel", a.sequence_parallel, "with --tp: split norms and dropout along the sequence too")
      ->group(par_group);
  app.add_option("--cp", a.cp,
                 fmt::format("context-parallel degree: each sequence split over N GPUs, attention's keys and values passed "
                             "round them as a ring (--framework {}; default 1)",
                             profiles_where([](const stack_profile& p) { return p.traits.context_parallel; })))
      ->type_name("N")->group(par_group);
  app.add_option("--pp", a.pp, "pipeline-parallel degree, 1F1B schedule (must divide the layers)")->type_name("N")->group(par_group);
  app.add_option("--vpp", a.vpp, "model chunks per pipeline GPU: Megatron's interleaved 1F1B schedule (default 1: not "
                 "interleaved; --pp x --vpp must divide the layers)")->type_name("N")->group(par_group);
  app.add_option("--ep", a.ep, "expert-parallel degree for Mixture-of-Experts models: each GPU holds experts/N of each layer's "
                               "experts (must divide the experts and the data-parallel GPUs)")
      ->type_name("N")->group(par_group);
  app.add_option("--capacity-factor", a.capacity_factor,
                 "MoE: dropless (default) or C >= 1: each expert takes at most C x k x tokens / experts rows, padded")
      ->type_name("C")->group(par_group);
  app.add_option("--offload", a.offload, "none | optimizer | params (needs --zero 3) | both")->type_name("WHAT")->group(par_group);
  app.add_option("--host-memory", a.host_memory, "CPU memory per GPU for offload, e.g. 256G (checked when given)")
      ->type_name("BYTES")->group(par_group);
  app.add_option("--finetune", a.finetune, "full (default) | lora | qlora")->type_name("KIND")->group(par_group);
  app.add_option("--lora-rank", a.lora_rank, "LoRA rank r (default 16)")->type_name("R")->group(par_group);
  const std::string peft_stacks = profiles_offering(&stack_profile::lora_through_peft);
  app.add_option("--lora-dtype", a.lora_dtype,
                 fmt::format("{}: the adapters' dtype: fp32 (default: peft upcasts a 16-bit base's) | model (the model "
                             "cast after get_peft_model)", peft_stacks))
      ->type_name("DTYPE")->group(par_group);
  app.add_option("--lora-dropout", a.lora_dropout,
                 fmt::format("{}: peft's lora_dropout, applied to each adapted linear's input (default 0, as peft's)",
                             peft_stacks))
      ->type_name("P")->group(par_group);
  app.add_option("--lora-targets", a.lora_targets, "layers with adapters: q,k,v,o[,mlp] (default q,k,v,o)")
      ->type_name("LIST")->group(par_group);
  const char* gpu_group = "GPU and data";
  app.add_option("--gpu,-g", a.gpu, "GPU name (see `plan gpus`; default h100, or --cluster's)")->type_name("NAME")->group(gpu_group)
      ->each([&a](const std::string&) { a.gpu_given = true; });
  add_cluster_options(app, a.cluster, gpu_group);
  app.add_option("--data-dir", a.data_dir, "folder with gpus.json / models.json / calibration.json whose entries add to or replace the built-in ones")
      ->type_name("DIR")->group(gpu_group);
  // The options a suggestion changes (planner/search/levers.cpp, change_flags) take their last value, so that a
  // suggestion appended to the command line that produced it runs as printed.
  for (const char* name : {"--seq", "--micro-batch", "--grad-accum", "--recompute", "--attention", "--precision",
                           "--grad-dtype", "--optimizer", "--optimizer-impl", "--offload", "--finetune", "--gpus", "--zero",
                           "--ep"})
    if (CLI::Option* o = app.get_option_no_throw(name)) o->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

resolved_run resolve_model_run(const model_run_args& a) {
  resolved_run r;
  r.data = catalog::load(a.data_dir.empty() ? std::nullopt : std::optional<std::filesystem::path>(a.data_dir));

  // ---- the model ----
  const int sources = !a.model.empty() + !a.params.empty() + !a.hf_config.empty();
  if (sources > 1) throw input_error("give only one of --model, --params and --hf-config");
  const bool custom_shape = !a.layers.empty() || !a.hidden.empty() || !a.heads.empty() || !a.vocab.empty();
  bool from_scratch = false;
  if (!a.model.empty()) {
    named_model named = model_by_name(r.data, a.model);  // a preset, else the Hugging Face cache
    r.model = std::move(named.spec);
    if (!named.note.empty()) r.notes.push_back(std::move(named.note));
  } else if (!a.params.empty()) {
    shape_choice choice = shape_for_params(parse_decimal_count(a.params, "--params"), r.data);
    r.model = choice.spec;
    r.notes.push_back(choice.rule + "; override with --model NAME or --layers/--hidden/--heads/--kv-heads/--ffn/--vocab");
  } else if (!a.hf_config.empty()) {
    r.model = model_from_hf_config(locate_hf_config(a.hf_config));  // a file, or a model's folder
  } else if (custom_shape) {
    from_scratch = true;
    if (a.layers.empty() || a.hidden.empty() || a.heads.empty() || a.vocab.empty())
      throw input_error("a shape given from scratch needs --layers, --hidden, --heads and --vocab");
    r.model.name = "custom";
    r.model.family = a.family.empty() ? model_family::llama : parse_family(a.family);
    r.model.source = "command line";
  } else {
    throw input_error("no model given: use --model NAME, --params 7B, --hf-config FILE|DIR or --layers/--hidden/--heads/--vocab");
  }

  model_spec& m = r.model;
  const bool shape_overridden = custom_shape || !a.family.empty() || !a.kv_heads.empty() || !a.ffn.empty() ||
                                !a.experts.empty() || !a.experts_per_token.empty();
  if (!from_scratch && !a.family.empty()) m.family = parse_family(a.family);
  if (!a.layers.empty()) m.layers = parse_integer(a.layers, "--layers");
  if (!a.hidden.empty()) m.hidden = parse_integer(a.hidden, "--hidden");
  if (!a.heads.empty()) m.heads = parse_integer(a.heads, "--heads");
  if (!a.vocab.empty()) m.vocab = parse_integer(a.vocab, "--vocab");
  if (from_scratch || !a.hidden.empty() || !a.heads.empty()) {
    if (m.hidden % m.heads != 0)
      throw input_error(fmt::format("--heads {} does not divide --hidden {}", m.heads, m.hidden));
    m.head_dim = m.hidden / m.heads;
  }
  if (!a.kv_heads.empty()) m.kv_heads = parse_integer(a.kv_heads, "--kv-heads");
  else if (from_scratch || !a.heads.empty()) m.kv_heads = m.heads;
  if (!a.ffn.empty()) m.ffn = parse_integer(a.ffn, "--ffn");
  else if (from_scratch || !a.hidden.empty()) {
    m.ffn = m.family == model_family::gpt ? 4 * m.hidden : llama_ffn(m.hidden);
    if (!from_scratch) r.notes.push_back(fmt::format("--hidden changed: ffn re-derived as {} (give --ffn to set it)", m.ffn));
  }
  if (from_scratch) {
    m.tied_embeddings = m.family == model_family::gpt;
    m.max_positions = 0;
    m.dropout = m.family == model_family::gpt ? 0.1 : 0.0;
  }
  if (!a.experts.empty()) {
    m.experts = parse_integer(a.experts, "--experts", 0);
    if (m.experts == 0) m.experts_per_token = m.shared_expert_ffn = 0;  // a dense MLP
    else if (a.experts_per_token.empty() && (m.experts_per_token == 0 || m.experts_per_token > m.experts))
      throw input_error(fmt::format("--experts {} needs --experts-per-token K (1 to {})", m.experts, m.experts));
  }
  if (!a.experts_per_token.empty()) {
    if (m.experts == 0) throw input_error("--experts-per-token needs --experts N (or an MoE model)");
    m.experts_per_token = parse_integer(a.experts_per_token, "--experts-per-token");
  }
  if (shape_overridden && !from_scratch) m.name += " (modified)";
  validate_model(m);

  // ---- the run ----
  run_config& run = r.run;
  if (!a.seq.empty()) {
    run.seq = parse_binary_count(a.seq, "--seq");
  } else {
    run.seq = m.max_positions > 0 ? std::min<std::uint64_t>(4096, m.max_positions) : 4096;
    r.notes.push_back(fmt::format("--seq not given: assumed {}", run.seq));
  }
  apply_parallel_options(a, run);  // first: the global batch spans the data-parallel GPUs
  r.cluster = resolve_cluster(a.cluster, r.data, a.gpu, a.gpu_given, !a.gpus.empty(), run, r.notes);  // --nodes may set --gpus
  if (!a.micro_batch.empty()) run.micro_batch = parse_binary_count(a.micro_batch, "--micro-batch");
  if (!a.grad_accum.empty()) run.grad_accum = parse_binary_count(a.grad_accum, "--grad-accum");
  if (!a.global_batch.empty()) {
    const std::uint64_t global = parse_binary_count(a.global_batch, "--global-batch");
    check_parallel_layout(run);
    const std::uint64_t per_step = checked_mul(run.micro_batch, run.data_parallel(), "--global-batch");
    if (global % per_step != 0)
      throw input_error(fmt::format("--global-batch {} is not a multiple of --micro-batch {} x {} data-parallel GPUs", global,
                                    run.micro_batch, run.data_parallel()));
    const std::uint64_t accum = global / per_step;
    if (!a.grad_accum.empty() && accum != run.grad_accum)
      throw input_error(fmt::format("--global-batch {} = {} x {} x {} contradicts --grad-accum {}", global, run.micro_batch,
                                    run.data_parallel(), accum, run.grad_accum));
    run.grad_accum = accum;
  }
  apply_framework_options(a, run);
  const stack_profile& stack = profile_of(run);
  if (a.framework.empty() && &stack != &default_cli_profile())
    r.notes.push_back(fmt::format("--ep: expert parallelism is {}'s ({} has none), so this predicts --framework {}",
                                  stack.title, default_cli_profile().title, stack.name));
  // Options this run ignores are said, so that a script's slip is seen rather than silently planned around.
  if (run.finetune == finetune_kind::full)
    for (const auto& [given, name] : {std::pair{!a.lora_rank.empty(), "--lora-rank"}, std::pair{!a.lora_targets.empty(), "--lora-targets"},
                                      std::pair{!a.lora_dtype.empty(), "--lora-dtype"}, std::pair{!a.lora_dropout.empty(), "--lora-dropout"}})
      if (given) r.notes.push_back(fmt::format("{} has no effect without --finetune lora or qlora", name));
  for (const auto& [given, name] : {std::pair{!a.lora_dtype.empty(), "--lora-dtype"}, std::pair{!a.lora_dropout.empty(), "--lora-dropout"}})
    if (given && run.finetune != finetune_kind::full && !stack.lora_through_peft)
      r.notes.push_back(fmt::format("{} has no effect under --framework {}: it describes peft, which it does not use", name,
                                    stack.name));
  if (run.sequence_parallel && run.tp == 1) r.notes.push_back("--sequence-parallel has no effect without --tp above 1");
  if (run.expandable_segments && !stack.offers_expandable_segments)
    r.notes.push_back(fmt::format("--expandable-segments has no effect under --framework {}: it configures PyTorch's "
                                  "caching allocator, which that stack does not use", stack.name));
  run.grad_dtype = parse_grad_dtype(a.grad_dtype);
  run.optimizer = parse_optimizer(a.optimizer);
  run.recompute = parse_recompute(recompute_text(a));
  run.attention = parse_attention(a.attention);
  apply_loss_options(a, run);
  // A stack without dropout (llm.c) takes the model's as 0 unless one is asked for (then refused).
  run.dropout = !a.dropout.empty() ? parse_probability(a.dropout, "--dropout") : !stack.runs_model_dropout ? 0.0 : m.dropout;

  r.gpu = r.data.gpu(r.cluster && r.cluster->given ? r.cluster->cluster.gpu : a.gpu);
  // The cluster the plan's collectives run on (gpu_spec::cluster). Its GPUs per node are the preset's unless
  // --gpus-per-node says fewer: the planner spreads a run over as few nodes as hold it, for this run and for
  // every other GPU count a suggestion or a search tries.
  if (r.cluster) {
    cluster_spec used = r.cluster->cluster;
    if (!a.cluster.gpus_per_node.empty()) used.gpus_per_node = r.cluster->gpus_per_node;
    r.gpu.cluster = std::make_shared<const cluster_spec>(std::move(used));
  }  // else the GPU's usual node stays: the plan says why it cannot hold the run
  r.calib = r.data.calibration_for(r.gpu);
  return r;
}

std::string precision_text(const model_run_args& a) {
  if (!a.precision.empty()) return a.precision;
  // A malformed --finetune is reported where it is parsed; here it only picks the default.
  return std::string(precision_name(chosen_profile(a).default_precision(a.finetune == "lora")));
}

std::string recompute_text(const model_run_args& a) {
  if (!a.recompute.empty()) return a.recompute;
  return std::string(recompute_name(chosen_profile(a).default_recompute));
}

const stack_profile& chosen_profile(const model_run_args& a) {
  if (!a.framework.empty()) return profile_named(a.framework);
  return default_cli_profile(!a.ep.empty() && parse_integer(a.ep, "--ep") > 1);
}

void apply_framework_options(const model_run_args& a, run_config& run) {
  run.profile = &chosen_profile(a);
  run.optimizer_impl = parse_optimizer_impl(a.optimizer_impl);
  run.precision = parse_precision(precision_text(a));
  run.expandable_segments = a.expandable_segments;
  // A stack that always shards (FSDP2: ZeRO-3; DeepSpeed under the Trainer: ZeRO-2 in its examples) unless told.
  if (a.zero.empty() && a.fsdp.empty()) run.zero = run.profile->default_zero;
}

void apply_loss_options(const model_run_args& a, run_config& run) {
  run.loss = parse_loss(a.loss);
  if (!a.loss_chunks.empty()) {
    if (run.loss != loss_kind::chunked)
      throw input_error("--loss-chunks applies to --loss chunked (Liger's fused-linear loss sizes its chunks from the "
                        "vocabulary and hidden size; the standard loss has none)");
    run.loss_chunks = parse_integer(a.loss_chunks, "--loss-chunks", 1);
  }
  if (!a.packing.empty()) run.packing_doc_tokens = parse_integer(a.packing, "--packing", 1);
  // A bare --compile is the stack's own scope (stack_profile::compile_scopes); one it does not offer, check_run refuses.
  const stack_profile& stack = profile_of(run);
  if (a.compile == "default")
    run.compile = stack.compile_scopes.empty() ? compile_scope::model : stack.compile_scopes.front();
  else if (!a.compile.empty())
    run.compile = parse_compile_scope(a.compile);
}

void apply_parallel_options(const model_run_args& a, run_config& run) {
  if (!a.pp.empty()) run.pp = parse_integer(a.pp, "--pp");
  if (!a.vpp.empty()) run.vpp = parse_integer(a.vpp, "--vpp");
  if (!a.gpus.empty()) run.gpus = parse_integer(a.gpus, "--gpus");
  if (!a.tp.empty()) run.tp = parse_integer(a.tp, "--tp");
  if (!a.cp.empty()) run.cp = parse_integer(a.cp, "--cp");
  run.sequence_parallel = a.sequence_parallel;
  if (!a.ep.empty()) run.ep = parse_integer(a.ep, "--ep");
  if (!a.capacity_factor.empty() && a.capacity_factor != "dropless") {
    run.capacity_factor = parse_number_in(a.capacity_factor, "--capacity-factor", 1.0, 1024.0);
  }
  if (run.gpus == 0 || run.tp == 0 || run.pp == 0) throw input_error("--gpus, --tp and --pp must be at least 1");
  if (run.cp == 0) throw input_error("--cp must be at least 1");
  checked_mul(checked_mul(run.tp, run.pp, "--tp x --pp"), run.cp, "--tp x --cp x --pp");  // refused here, before anything divides by the product
  if (!a.zero.empty()) {  // checked before the int cast: 4294967299 must not become ZeRO-3
    const auto zero_stage = parse_integer(a.zero, "--zero", 0);
    if (zero_stage > 3) throw input_error("--zero must be 0, 1, 2 or 3");
    run.zero = static_cast<int>(zero_stage);
  }
  if (!a.fsdp.empty()) {
    const int stage = a.fsdp == "full" ? 3 : a.fsdp == "grad-op" ? 2 : -1;
    if (stage < 0) throw input_error(fmt::format("--fsdp: unknown mode '{}' (known: full, grad-op)", a.fsdp));
    if (!a.zero.empty() && run.zero != stage)
      throw input_error(fmt::format("--fsdp {} is ZeRO-{}, which contradicts --zero {}", a.fsdp, stage, run.zero));
    run.zero = stage;
  }
  if (run.zero > 3) throw input_error("--zero must be 0, 1, 2 or 3");
  if (!a.offload.empty()) run.offload = parse_offload(a.offload);
  if (!a.host_memory.empty()) run.host_memory_bytes = parse_binary_count(a.host_memory, "--host-memory");
  if (!a.finetune.empty()) run.finetune = parse_finetune(a.finetune);
  if (!a.lora_rank.empty()) run.lora_rank = parse_integer(a.lora_rank, "--lora-rank");
  if (!a.lora_targets.empty()) run.lora_targets = parse_lora_targets(a.lora_targets);
  if (!a.lora_dtype.empty()) {
    if (a.lora_dtype != "fp32" && a.lora_dtype != "model")
      throw input_error(fmt::format("--lora-dtype: unknown '{}' (known: fp32, model)", a.lora_dtype));
    run.lora_fp32 = a.lora_dtype == "fp32";
  }
  if (!a.lora_dropout.empty()) run.lora_dropout = parse_probability(a.lora_dropout, "--lora-dropout");
}

}  // namespace trainplan::cli
