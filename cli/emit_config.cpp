// `--emit ENGINE` (emit_config.hpp): the planned run as each engine's configuration file, and what an engine
// cannot express refused or noted.
#include "cli/emit_config.hpp"

#include "planner/profiles/registry.hpp"

#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "planner/util/input_error.hpp"

// What each engine reads, and where it was read (the rules below cite these):
//   DeepSpeed: deepspeed/runtime/engine.py (get_data_types, _do_optimizer_sanity_check, _configure_optimizer;
//     a torch_autocast section in releases after February 2025), runtime/config.py (optimizer types, case
//     folded), runtime/zero/config.py and docs/_pages/config-json.md (offload from stage 1, parameters at 3).
//   Accelerate: commands/launch.py, utils/dataclasses.py FullyShardedDataParallelPlugin (fsdp_offload_params
//     is FSDP's CPUOffload(offload_params=True): parameters, gradients and the optimizer step on the CPU).
//   transformers: TrainingArguments and Trainer.get_optimizer_cls_and_kwargs (optim names; "sgd" builds
//     torch.optim.SGD with the learning rate alone); peft: LoraConfig, docs/source/accelerate/fsdp.md (QLoRA
//     under FSDP stores the 4-bit weights in the model's dtype, bnb_4bit_quant_storage).
//   torchtitan v0.2 (the last TOML job config, February 2026): torchtitan/config/job_config.py,
//     models/__init__.py (its model names), models/llama3/infra/parallelize.py (DDP only alone; FSDP's
//     reshard_after_forward "default" is "not pipeline-parallel"), distributed/pipeline_parallel.py
//     (microbatches = local_batch_size / pipeline_parallel_microbatch_size), components/optimizer.py (Adam,
//     AdamW).
//   torchtune: recipes/full_finetune_single_device.py (batch_size, gradient_accumulation_steps, dtype, compile,
//     enable_activation_checkpointing, enable_activation_offloading, optimizer_in_bwd; the loss's
//     num_output_chunks set on the model for CEWithChunkedOutputLoss) and recipes/configs/llama3_2/
//     3B_full_single_device.yaml (its keys' layout: tokenizer.max_seq_len, dataset.packed, optimizer, loss).
namespace trainplan::cli {
namespace {

using json = nlohmann::json;

enum class half_kind { none, bf16, fp16 };

half_kind half_of(precision_regime p) {
  switch (p) {
    case precision_regime::bf16_mixed: case precision_regime::bf16: case precision_regime::amp_bf16:
    case precision_regime::megatron_bf16: case precision_regime::fp8_mixed: return half_kind::bf16;
    case precision_regime::fp16_mixed: case precision_regime::amp_fp16: return half_kind::fp16;
    case precision_regime::fp32: return half_kind::none;
  }
  return half_kind::none;
}
bool is_autocast(const run_config& r) { return r.precision == precision_regime::amp_bf16 || r.precision == precision_regime::amp_fp16; }
bool offloads_optimizer(const run_config& r) { return r.offload == offload_mode::optimizer || r.offload == offload_mode::both; }
bool offloads_params(const run_config& r) { return r.offload == offload_mode::params || r.offload == offload_mode::both; }

[[noreturn]] void refuse(const std::string& engine, const std::string& why) {
  throw input_error(fmt::format("--emit {}: {}", engine, why));
}

// Hyperparameters the plan does not decide (its memory and time do not depend on them) and cannot know: written
// as this placeholder, which no engine reads as a number, so that a config is not run with a guess.
constexpr const char* placeholder = "SET_ME";

void note_placeholders(const std::string& engine, const std::string& keys, std::vector<std::string>& notes) {
  notes.push_back(fmt::format("{}: {} are written as \"{}\": the plan does not know them; set them before training",
                              engine, keys, placeholder));
}

// Refusals every engine shares: what none of their config files expresses.
void refuse_common(const std::string& engine, const run_config& r) {
  if (r.ep > 1)
    refuse(engine, "expert parallelism (--ep) is set in the model code (DeepSpeed-MoE's ep_size, torchtitan's MoE "
                   "models), not emitted here");
}

// Pure bf16 (no fp32 master copy) is the model loaded in bf16, which no Trainer or Accelerate key says.
void note_pure_bf16(const std::string& engine, const run_config& r, std::vector<std::string>& notes) {
  if (r.precision == precision_regime::bf16)
    notes.push_back(engine + ": pure bf16: load the model with torch_dtype=torch.bfloat16 (no config key says so)");
}

// What the training script sets when it loads the Hugging Face model, which no engine config holds (and an
// fp32 accumulation buffer, which only DeepSpeed's config holds: `holds_grad_accum_dtype`).
void note_model_loading(const std::string& engine, const run_config& r, bool holds_grad_accum_dtype,
                        std::vector<std::string>& notes) {
  if (profile_of(r).hugging_face_modules && r.attention == attention_kind::eager)
    notes.push_back(engine + ": eager attention: load the model with attn_implementation=\"eager\"");
  if (r.attention == attention_kind::flash_attention_2)
    notes.push_back(engine + ": flash-attn: load the model with attn_implementation=\"flash_attention_2\" (the "
                             "flash-attn package installed)");
  // The loss the plan assumed, which no engine config selects. Liger's Trainer switch (use_liger_kernel) also
  // swaps RMSNorm, SwiGLU and RoPE for its own kernels, which the plan does not model: the loss alone is the
  // apply_liger_kernel_to_<model> call with the others off (liger_kernel/transformers/monkey_patch.py).
  if (r.loss == loss_kind::fused_linear)
    notes.push_back(engine + ": --loss fused-linear: patch the model with Liger's fused linear cross-entropy alone "
                             "(apply_liger_kernel_to_llama(rope=False, rms_norm=False, swiglu=False, "
                             "fused_linear_cross_entropy=True), or the call for your model); use_liger_kernel=True "
                             "also swaps kernels the plan does not model");
  if (r.loss == loss_kind::chunked)
    notes.push_back(fmt::format("{}: --loss chunked: the chunked output and cross-entropy ({} chunks, torchtune's "
                                "CEWithChunkedOutputLoss) are your training code's; no key of this config selects them",
                                engine, r.loss_chunks ? r.loss_chunks : 8));
  if (r.packing_doc_tokens > 0)
    notes.push_back(fmt::format("{}: --packing {}: pack the documents into rows of {} tokens with position_ids restarting "
                                "at each (TRL's SFTConfig(packing=True), or your collator); no key of this config does it",
                                engine, r.packing_doc_tokens, r.seq));
  // --compile: the Trainer's torch_compile key compiles the whole model (hf_trainer_config writes it); elsewhere
  // the script's torch.compile(model), as the plan models it (planner/profiles/hf/hf_compile.hpp).
  if (r.compile == compile_scope::model && engine != "hf-trainer")
    notes.push_back(engine + ": --compile: compile the whole model, its loss included, with torch.compile(model) in "
                             "your script; no key of this config does it");
  if (r.compile == compile_scope::layers)
    notes.push_back(engine + ": --compile layers: compile each decoder layer apart (accelerate's TorchDynamoPlugin with "
                             "use_regional_compilation, or each layer's .compile() in your script); no key of this "
                             "config does it");
  if (r.compile == compile_scope::layers_and_loss)
    notes.push_back(engine + ": --compile layers+loss: compile each decoder layer and the loss apart (each layer's "
                             ".compile() and torch.compile of the loss in your script); no key of this config does it");
  if (r.finetune != finetune_kind::full && !r.lora_fp32)
    notes.push_back(engine + ": --lora-dtype model: cast the adapters to the model's dtype after get_peft_model "
                             "(peft keeps them in fp32 otherwise)");
  const bool sixteen_bit_grads = r.precision == precision_regime::bf16 || r.precision == precision_regime::bf16_mixed ||
                                 r.precision == precision_regime::fp16_mixed;
  if (r.grad_dtype == grad_dtype_choice::fp32 && sixteen_bit_grads && !holds_grad_accum_dtype)
    notes.push_back(engine + ": --grad-dtype fp32 (an fp32 gradient accumulation buffer) is no setting of it: the run "
                             "accumulates in the gradients' own dtype");
}

// Hugging Face module names of the LoRA targets (GPT2LMHeadModel, LlamaForCausalLM and the models with its
// names, Phi-3's fused projections, DeepseekV3Attention's latent projections).
std::vector<std::string> hf_target_modules(const std::string& engine, const model_spec& m, unsigned t) {
  std::vector<std::string> out;
  if (m.family == model_family::gpt) {
    if (t & (lora_q | lora_k | lora_v)) out.push_back("c_attn");  // GPT-2 fuses q, k, v
    if (t & lora_o) out.push_back("attn.c_proj");
    if (t & lora_mlp) out.insert(out.end(), {"c_fc", "mlp.c_proj"});
    return out;
  }
  if (m.is_mla()) {  // planner/run/lora.cpp counts the same modules
    if (t & lora_q) {
      if (m.q_lora_rank > 0) out.insert(out.end(), {"q_a_proj", "q_b_proj"});
      else out.push_back("q_proj");
    }
    if (t & lora_k) out.push_back("kv_a_proj_with_mqa");
    if (t & lora_v) out.push_back("kv_b_proj");
  } else if (m.fused_projections) {  // Phi-3: naming any of q, k, v adapts qkv_proj, as planner/run/lora.cpp counts
    if (t & (lora_q | lora_k | lora_v)) out.push_back("qkv_proj");
  } else {
    if (t & lora_q) out.push_back("q_proj");
    if (t & lora_k) out.push_back("k_proj");
    if (t & lora_v) out.push_back("v_proj");
  }
  if (t & lora_o) out.push_back("o_proj");
  if (t & lora_mlp) {
    if (m.is_moe())
      refuse(engine, "the experts' MLP module names differ between transformers versions (separate linears or fused "
                     "3-D weights): adapt the attention (--lora-targets q,k,v,o) or write target_modules by hand");
    if (m.fused_projections) out.insert(out.end(), {"gate_up_proj", "down_proj"});
    else out.insert(out.end(), {"gate_proj", "up_proj", "down_proj"});
  }
  return out;
}

json deepspeed(const run_config& r, std::vector<std::string>& notes) {
  const std::string e = "deepspeed";
  refuse_common(e, r);
  if (r.tp > 1 || r.pp > 1) refuse(e, "tensor and pipeline parallelism are Megatron-DeepSpeed's, not in a DeepSpeed config");
  if (r.precision == precision_regime::fp8_mixed)
    refuse(e, "a DeepSpeed config has no fp8 switch (Transformer Engine's fp8 is set in the model code)");
  if (r.offload != offload_mode::none && r.zero == 0)
    refuse(e, "DeepSpeed offloads the optimizer from ZeRO stage 1 on (and parameters at stage 3): use --zero 1 or more");
  if (half_of(r.precision) == half_kind::fp16 && !is_autocast(r) && r.zero == 0 && r.grad_dtype == grad_dtype_choice::fp32)
    refuse(e, "without ZeRO DeepSpeed rejects fp16 weights with fp32 gradient accumulation ('unsupported mix of model dtype "
              "and gradient accumulation type'): use --zero 1 or more");
  const bool adam_like = r.optimizer == optimizer_kind::adamw || r.optimizer == optimizer_kind::lion;
  if (!adam_like && offloads_optimizer(r))
    refuse(e, fmt::format("DeepSpeed's CPU offload steps its own CPU Adam, Adagrad or Lion, not {}", optimizer_name(r.optimizer)));

  json zero = {{"stage", r.zero}, {"overlap_comm", true}, {"contiguous_gradients", true}};
  if (offloads_optimizer(r)) zero["offload_optimizer"] = {{"device", "cpu"}, {"pin_memory", true}};
  if (offloads_params(r)) zero["offload_param"] = {{"device", "cpu"}, {"pin_memory", true}};
  const half_kind half = half_of(r.precision);
  // bf16/fp16 "enabled" casts the model to 16 bits with an fp32 master copy in the optimizer; torch_autocast
  // keeps the fp32 model and autocasts the forward, as PyTorch AMP does.
  const bool cast_model = !is_autocast(r);
  json j = {{"train_batch_size", r.global_batch()},
            {"train_micro_batch_size_per_gpu", r.micro_batch},
            {"gradient_accumulation_steps", r.grad_accum},
            {"gradient_clipping", placeholder},
            {"bf16", {{"enabled", cast_model && half == half_kind::bf16}}},
            {"fp16", {{"enabled", cast_model && half == half_kind::fp16}, {"loss_scale", 0}, {"initial_scale_power", 16}}},
            {"zero_optimization", zero}};
  if (is_autocast(r)) {
    j["torch_autocast"] = {{"enabled", true}, {"dtype", half == half_kind::bf16 ? "bfloat16" : "float16"}};
    notes.push_back("deepspeed: torch_autocast (autocast over the fp32 model, as the plan's " +
                    std::string(precision_name(r.precision)) +
                    ") is read by DeepSpeed releases after February 2025; an older one ignores it and trains in fp32");
  } else if (r.precision == precision_regime::bf16) {
    notes.push_back("deepspeed: its bf16 mode keeps an fp32 master copy of the weights in the optimizer (4 bytes a "
                    "parameter, sharded by ZeRO), which the plan's pure bf16 does not have");
  }
  // Without ZeRO, bf16 weights accumulate their gradients in fp32 by default (get_data_types, BF16_Optimizer).
  if (cast_model && half == half_kind::bf16 && r.zero == 0 && r.grad_dtype != grad_dtype_choice::fp32)
    notes.push_back("deepspeed: without ZeRO its bf16 mode accumulates gradients in fp32 (4 bytes a parameter more than "
                    "the plan: --grad-dtype fp32 plans that)");
  if (r.grad_dtype == grad_dtype_choice::fp32) j["data_types"] = {{"grad_accum_dtype", "fp32"}};
  // The optimizer's own constants (betas, eps) are its defaults (torch.optim.AdamW; Lion's paper, Chen et al. 2023).
  const bool own_optimizer = r.optimizer == optimizer_kind::adamw || r.optimizer == optimizer_kind::lion;
  if (r.optimizer == optimizer_kind::adamw) {
    j["optimizer"] = {{"type", "AdamW"},
                      {"params", {{"lr", placeholder}, {"betas", {0.9, 0.999}}, {"eps", 1e-8}, {"weight_decay", placeholder}}}};
  } else if (r.optimizer == optimizer_kind::lion) {
    j["optimizer"] = {{"type", "Lion"}, {"params", {{"lr", placeholder}, {"betas", {0.9, 0.99}}, {"weight_decay", placeholder}}}};
  } else {
    // A client optimizer: ZeRO asserts on one outside its tested list unless told (runtime/zero/utils.py).
    if (r.zero >= 1) j["zero_allow_untested_optimizer"] = true;
    notes.push_back(fmt::format("deepspeed: no optimizer section: pass your {} to deepspeed.initialize(optimizer=...)",
                                optimizer_name(r.optimizer)));
  }
  // The warmup, with DeepSpeed's optimizer: its WarmupLR scheduler (runtime/lr_schedules.py).
  if (own_optimizer)
    j["scheduler"] = {{"type", "WarmupLR"},
                      {"params", {{"warmup_min_lr", 0}, {"warmup_max_lr", placeholder}, {"warmup_num_steps", placeholder}}}};
  note_placeholders("deepspeed",
                    own_optimizer ? "gradient_clipping, the optimizer's lr and weight_decay, and the scheduler's "
                                    "warmup_max_lr and warmup_num_steps"
                                  : "gradient_clipping",
                    notes);
  if (r.recompute != recompute_mode::none)
    notes.push_back(fmt::format("deepspeed: activation checkpointing ({}) is the model's, not in a DeepSpeed config "
                                "(model.gradient_checkpointing_enable() or deepspeed.checkpointing)",
                                recompute_name(r.recompute)));
  if (r.finetune != finetune_kind::full)
    notes.push_back(fmt::format("deepspeed: the {} adapters are your script's (peft; --emit hf-trainer writes a "
                                "LoraConfig){}", finetune_name(r.finetune),
                                r.finetune == finetune_kind::qlora && is_autocast(r)
                                    ? "; torch_autocast with a 4-bit base is untested here" : ""));
  note_model_loading(e, r, true, notes);
  return j;
}

// FSDP offloads parameters, gradients and the optimizer step together (CPUOffload(offload_params=True)).
void refuse_partial_fsdp_offload(const std::string& engine, const run_config& r) {
  if (r.offload == offload_mode::optimizer || r.offload == offload_mode::params)
    refuse(engine, fmt::format("FSDP offloads parameters, gradients and the optimizer together (--offload both), not "
                               "the {} alone (--emit deepspeed offloads the optimizer alone)", offload_name(r.offload)));
}

std::string accelerate_fsdp(const run_config& r, std::vector<std::string>& notes) {
  const std::string e = "fsdp";
  refuse_common(e, r);
  if (r.zero == 1) refuse(e, "FSDP has no ZeRO-1 (use --zero 2, 3 or 0)");
  if (r.tp > 1 || r.pp > 1) refuse(e, "tensor and pipeline parallelism are not part of an Accelerate FSDP config");
  if (r.precision == precision_regime::fp8_mixed) refuse(e, "Accelerate's FSDP config has no fp8 (Transformer Engine) setting here");
  if (r.recompute == recompute_mode::selective)
    refuse(e, "FSDP's activation checkpointing wraps whole layers: --recompute full or none");
  refuse_partial_fsdp_offload(e, r);
  const half_kind half = half_of(r.precision);
  note_pure_bf16(e, r, notes);
  if (r.finetune != finetune_kind::full)
    notes.push_back("fsdp: the LoRA adapters are your script's (peft); --emit hf-trainer writes a LoraConfig");
  notes.push_back(fmt::format("fsdp: the optimizer is your script's: the plan assumes {}{}", optimizer_name(r.optimizer),
                              r.optimizer == optimizer_kind::adamw ? fmt::format(" ({})", optimizer_impl_name(r.optimizer_impl)) : ""));
  note_model_loading(e, r, false, notes);
  const char* strategy = r.zero >= 3 ? "FULL_SHARD" : r.zero == 2 ? "SHARD_GRAD_OP" : "NO_SHARD";
  // num_processes counts the GPUs of every machine; one machine is all this file can know.
  const std::string machines_note =
      r.gpus > 8 ? fmt::format("# {} GPUs: set num_machines (and machine_rank on each) for your nodes.\n", r.gpus) : "";
  if (r.gpus > 8) notes.push_back("fsdp: num_machines is 1: set it (and machine_rank on each node) for your nodes");
  notes.push_back("fsdp: the learning rate, weight decay, gradient clipping and warmup are your script's (no key here "
                  "holds them): the plan does not know them");
  return fmt::format(
      "# Hugging Face Accelerate config for PyTorch FSDP, written by trainplan (plan --emit fsdp).\n"
      "{}"
      "compute_environment: LOCAL_MACHINE\n"
      "distributed_type: FSDP\n"
      "mixed_precision: {}\n"
      "num_machines: 1\n"
      "num_processes: {}\n"
      "fsdp_config:\n"
      "  fsdp_sharding_strategy: {}\n"
      "  fsdp_offload_params: {}\n"
      "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
      "  fsdp_backward_prefetch: BACKWARD_PRE\n"
      "  fsdp_state_dict_type: SHARDED_STATE_DICT\n"
      "  fsdp_use_orig_params: true\n"
      "  fsdp_activation_checkpointing: {}\n"
      "# per-GPU micro-batch {} with {} accumulation steps: pass them to your training script.\n"
      "# SET_ME in your training script: learning rate, weight decay, gradient clipping, warmup (trainplan does not\n"
      "# know them).\n",
      machines_note, half == half_kind::bf16 ? "bf16" : half == half_kind::fp16 ? "fp16" : "no", r.gpus, strategy,
      r.offload == offload_mode::both ? "true" : "false", r.recompute == recompute_mode::full ? "true" : "false", r.micro_batch,
      r.grad_accum);
}

std::string hf_optim(const std::string& engine, const run_config& r) {
  switch (r.optimizer) {
    case optimizer_kind::adamw: return r.optimizer_impl == optimizer_impl_kind::fused ? "adamw_torch_fused" : "adamw_torch";
    case optimizer_kind::adamw_8bit: return "adamw_bnb_8bit";
    case optimizer_kind::adafactor: return "adafactor";
    case optimizer_kind::sgd: return "sgd";
    case optimizer_kind::sgd_momentum: refuse(engine, "the Trainer's sgd has no momentum (it passes the learning rate alone)");
    case optimizer_kind::lion: return "lion_32bit";
  }
  return "adamw_torch";
}

json hf_trainer(const run_config& r, std::vector<std::string>& notes) {
  const std::string e = "hf-trainer";
  refuse_common(e, r);
  if (r.tp > 1 || r.pp > 1) refuse(e, "the Trainer has no tensor or pipeline parallelism setting");
  if (r.zero == 1) refuse(e, "ZeRO-1 needs a DeepSpeed config (--emit deepspeed)");
  if (r.precision == precision_regime::fp8_mixed) refuse(e, "TrainingArguments has no fp8 switch");
  if (r.recompute == recompute_mode::selective)
    refuse(e, "Hugging Face checkpoints whole decoder layers: --recompute full or none");
  if (r.offload != offload_mode::none && r.zero < 2)
    refuse(e, "the Trainer offloads through FSDP (--zero 2 or 3) or a DeepSpeed config (--emit deepspeed)");
  refuse_partial_fsdp_offload(e, r);
  const half_kind half = half_of(r.precision);
  note_pure_bf16(e, r, notes);  // bf16=True autocasts over the weights as the script loads them
  note_model_loading(e, r, false, notes);
  json j = {{"output_dir", "./output"},
            {"per_device_train_batch_size", r.micro_batch},
            {"gradient_accumulation_steps", r.grad_accum},
            {"bf16", half == half_kind::bf16},
            {"fp16", half == half_kind::fp16},
            {"gradient_checkpointing", r.recompute == recompute_mode::full},
            {"optim", hf_optim(e, r)},
            {"learning_rate", placeholder},
            {"weight_decay", placeholder},
            {"max_grad_norm", placeholder},
            {"warmup_steps", placeholder}};
  note_placeholders(e, "learning_rate, weight_decay, max_grad_norm and warmup_steps", notes);
  // TrainingArguments.torch_compile: torch.compile over the whole model (the other scopes: emit_notes)
  if (r.compile == compile_scope::model) j["torch_compile"] = true;
  if (r.zero >= 2)
    j["fsdp"] = std::string(r.zero >= 3 ? "full_shard" : "shard_grad_op") + " auto_wrap" +
                (r.offload == offload_mode::both ? " offload" : "");
  return j;
}

json peft_config(const model_spec& m, const run_config& r, std::vector<std::string>& notes) {
  // lora_alpha scales the adapters' update, not their memory: the plan does not know it.
  note_placeholders("hf-trainer", "the LoraConfig's lora_alpha", notes);
  json lora = {{"lora_config", {{"r", r.lora_rank}, {"lora_alpha", placeholder}, {"lora_dropout", r.lora_dropout},
                                {"target_modules", hf_target_modules("hf-trainer", m, r.lora_targets)},
                                {"task_type", "CAUSAL_LM"}}}};
  if (r.finetune == finetune_kind::qlora) {
    lora["bnb_config"] = {{"load_in_4bit", true}, {"bnb_4bit_quant_type", "nf4"}, {"bnb_4bit_use_double_quant", true},
                          {"bnb_4bit_compute_dtype", "bfloat16"}};
    // Under FSDP the 4-bit weights are flattened with the rest: peft's FSDP + QLoRA recipe stores them in the
    // model's dtype (and loads the model in it).
    if (r.zero >= 2) lora["bnb_config"]["bnb_4bit_quant_storage"] = "bfloat16";
  }
  return lora;
}

std::string torchtitan(const model_spec& m, const run_config& r, std::vector<std::string>& notes) {
  const std::string e = "torchtitan";
  refuse_common(e, r);
  if (r.finetune != finetune_kind::full) refuse(e, "torchtitan pre-trains; it has no LoRA");
  if (m.family == model_family::gpt) refuse(e, "torchtitan has no GPT-2 model (its models: llama3, llama4, qwen3, deepseek_v3, ...)");
  if (m.is_moe() || m.is_mla())
    refuse(e, "torchtitan's MoE and latent-attention models (deepseek_v3, qwen3, llama4) are configured by their own "
              "flavors: not emitted here");
  // torchtitan's dense models are llama3 and qwen3 (q/k norms): none has Qwen2's q/k/v biases, a sliding
  // window shorter than the sequence, or Gemma 2's extra norms and soft caps.
  if (m.qkv_bias) refuse(e, fmt::format("torchtitan has no model with {}'s q/k/v biases", m.name));
  if (m.sliding_window_tokens > 0 && m.sliding_window_tokens < r.seq)
    refuse(e, fmt::format("torchtitan has no sliding-window attention ({}'s {} tokens, shorter than --seq {})", m.name,
                          m.sliding_window_tokens, r.seq));
  if (m.norms_per_layer != 2 || m.attn_logit_softcap > 0 || m.final_logit_softcap > 0 || m.embed_scale_sqrt_hidden)
    refuse(e, fmt::format("torchtitan has no model with {}'s extra norms, soft caps or scaled embeddings", m.name));
  if (half_of(r.precision) == half_kind::fp16) refuse(e, "torchtitan trains in bf16 or fp32 (no fp16 loss scaling)");
  if (r.zero == 1) refuse(e, "torchtitan has no optimizer-only sharding (ZeRO-1): use --zero 0, 2 or 3");
  if (r.zero == 0 && r.data_parallel() > 1 && (r.tp > 1 || r.pp > 1))
    refuse(e, "torchtitan's DDP (--zero 0) runs alone: with tensor or pipeline parallelism it shards (--zero 2 or 3)");
  if (r.pp > 1 && r.grad_accum < r.pp)
    refuse(e, fmt::format("torchtitan's 1F1B pipeline needs at least one microbatch per stage: --grad-accum {} is below "
                          "--pp {}", r.grad_accum, r.pp));
  if (r.optimizer != optimizer_kind::adamw) refuse(e, fmt::format("torchtitan's optimizers are Adam and AdamW, not {}", optimizer_name(r.optimizer)));
  // The plan's selective is torchtitan's per-op policy where the stack models it (fsdp2); elsewhere it is the
  // attention core alone, which torchtitan has no option for.
  const bool op_policy = profile_of(r).traits.selective_recompute == selective_recompute_kind::op_policy;
  if (r.recompute == recompute_mode::selective && !op_policy)
    refuse(e, "torchtitan's selective checkpointing (per op or every n-th layer) is not the plan's (the attention core "
              "alone): --recompute full or none (or --framework fsdp2, whose selective is torchtitan's per-op policy)");
  if (r.offload == offload_mode::optimizer || r.offload == offload_mode::params)
    refuse(e, "torchtitan offloads parameters, gradients and the optimizer together (--offload both with --zero 3)");
  const std::uint64_t dp = r.data_parallel();
  // FSDP2 shards over data_parallel_shard_degree; ZeRO 0 replicates (DDP). ZeRO-2 keeps the gathered
  // weights from forward to backward (reshard "never"), ZeRO-3 frees them (reshard "always"); torchtitan's
  // default would reshard without pipelining and not with it, whatever was planned.
  const std::uint64_t shard = r.zero >= 2 ? dp : 1, replicate = r.zero >= 2 ? 1 : dp;
  const std::string reshard = r.zero >= 2 ? fmt::format("fsdp_reshard_after_forward = \"{}\"\n", r.zero >= 3 ? "always" : "never") : "";
  // Pipelined, the step's micro-batches are the pipeline's microbatches: each rank takes micro x accumulation
  // sequences a step, split into microbatches of the micro-batch (no accumulation beyond them). Otherwise
  // torchtitan accumulates global / (local x data-parallel) micro-batches.
  const std::uint64_t local = r.pp > 1 ? r.micro_batch * r.grad_accum : r.micro_batch;
  const std::string microbatch = r.pp > 1 ? fmt::format("pipeline_parallel_microbatch_size = {}\n", r.micro_batch) : "";
  const std::string dtype = r.precision == precision_regime::bf16 ? "dtype = \"bfloat16\"\n" : "";  // no fp32 master copy
  const std::string offload = r.offload == offload_mode::both ? "enable_cpu_offload = true\n" : "";
  const std::string converters = r.precision == precision_regime::fp8_mixed ? "converters = [\"float8\"]\n" : "";
  const char* ac = r.recompute == recompute_mode::full ? "full" : r.recompute == recompute_mode::selective ? "selective" : "none";
  const std::string ac_option = r.recompute == recompute_mode::selective ? "selective_ac_option = \"op\"\n" : "";
  note_placeholders(e, "[training] steps and max_norm, [optimizer] lr and weight_decay, and [lr_scheduler] warmup_steps", notes);
  return fmt::format(
      "# torchtitan train config (v0.2's TOML job config; later releases configure in Python), written by trainplan\n"
      "# (plan --emit torchtitan). Set [model] flavor to your model's.\n"
      "[model]\nname = \"{}\"\n{}\n"
      "[training]\nlocal_batch_size = {}\nglobal_batch_size = {}\nseq_len = {}\nmixed_precision_param = \"{}\"\n{}{}"
      "steps = \"SET_ME\"  # SET_ME: the number of training steps (trainplan does not know it)\n"
      "max_norm = \"SET_ME\"  # SET_ME: gradient clipping (trainplan does not know it)\n\n"
      "[parallelism]\ndata_parallel_replicate_degree = {}\ndata_parallel_shard_degree = {}\n{}tensor_parallel_degree = {}\n"
      "pipeline_parallel_degree = {}\n{}"
      "enable_async_tensor_parallel = false\n\n"
      "[activation_checkpoint]\nmode = \"{}\"\n{}\n"
      "[optimizer]\nname = \"AdamW\"\nimplementation = \"{}\"\n"
      "lr = \"SET_ME\"  # SET_ME: the learning rate (trainplan does not know it)\n"
      "weight_decay = \"SET_ME\"  # SET_ME: the weight decay (trainplan does not know it)\n\n"
      "[lr_scheduler]\nwarmup_steps = \"SET_ME\"  # SET_ME: the warmup (trainplan does not know it)\n",
      m.qk_norm ? "qwen3" : "llama3", converters, local, r.global_batch(), r.seq, r.precision == precision_regime::fp32 ? "float32" : "bfloat16", dtype, offload,
      replicate, shard, reshard, r.tp, r.pp, microbatch, ac, ac_option,
      r.optimizer_impl == optimizer_impl_kind::fused ? "fused" : "foreach");
}

// torchtune's single-device full fine-tuning: the keys of its config the plan decided, as YAML to merge into the
// recipe's config for the model (tune cp), which holds the model's builder, tokenizer and checkpointer.
std::string torchtune(const model_spec& m, const run_config& r, std::vector<std::string>& notes) {
  const std::string e = "torchtune";
  refuse_common(e, r);
  // A plan of another stack's modules saves less than torchtune's (its attention's expanded k and v, its fp32
  // logits): the file would run what was not planned.
  const stack_profile& planned = profile_of(r);
  if (!planned.traits.expands_kv_heads || !planned.traits.model_upcasts_logits)
    refuse(e, fmt::format("the plan is of --framework {} ({}), whose modules save less than torchtune's: plan the run "
                          "with --framework torchtune", planned.name, planned.title));
  if (r.finetune != finetune_kind::full)
    refuse(e, "this writes full_finetune_single_device's config; torchtune's LoRA recipes (its own LoRALinear) are "
              "not what the plan models");
  if (r.gpus > 1) refuse(e, "this writes full_finetune_single_device's config: one GPU");
  if (r.precision != precision_regime::bf16 && r.precision != precision_regime::fp32)
    refuse(e, fmt::format("torchtune trains in the model's dtype (dtype: bf16 or fp32), not {}", precision_name(r.precision)));
  if (r.recompute == recompute_mode::selective)
    refuse(e, "the single-device recipe checkpoints whole decoder layers: --recompute full or none");
  if (r.offload != offload_mode::none) refuse(e, "the plan's offloading is not torchtune's (enable_activation_offloading)");
  if (r.loss == loss_kind::fused_linear) refuse(e, "Liger's fused linear cross-entropy is not a torchtune loss");
  if (r.compile != compile_scope::none && r.compile != compile_scope::layers_and_loss)
    refuse(e, fmt::format("torchtune's compile: True compiles each layer and the loss apart (--compile layers+loss), not "
                          "--compile {}", compile_scope_name(r.compile)));
  std::string optimizer;
  switch (r.optimizer) {
    case optimizer_kind::adamw:
      optimizer = fmt::format("  _component_: torch.optim.AdamW\n  fused: {}\n",
                              r.optimizer_impl == optimizer_impl_kind::fused ? "True" : "False");
      break;
    case optimizer_kind::adamw_8bit: optimizer = "  _component_: bitsandbytes.optim.PagedAdamW8bit\n"; break;
    default:
      refuse(e, fmt::format("the plan's {} is no optimizer torchtune's configs name: --optimizer adamw or adamw-8bit",
                            optimizer_name(r.optimizer)));
  }
  const std::string loss = r.loss == loss_kind::chunked
                               ? fmt::format("  _component_: torchtune.modules.loss.CEWithChunkedOutputLoss\n"
                                             "  num_output_chunks: {}\n",
                                             r.loss_chunks ? r.loss_chunks : 8)
                               : std::string("  _component_: torch.nn.CrossEntropyLoss\n");
  // (Packed rows run flex attention, which the plan does not model: its stack refuses --packing.)
  notes.push_back(fmt::format("{}: the plan takes every row as {} tokens; torchtune pads a batch to its longest sequence, "
                              "so a batch of shorter rows uses less", e, r.seq));
  notes.push_back(fmt::format("{}: the model's builder for {}, its tokenizer's and checkpointer's paths are the recipe "
                              "config's (model._component_: torchtune.models.<family>.<builder>)",
                              e, m.name));
  note_placeholders(e, "optimizer.lr", notes);
  return fmt::format(
      "# torchtune full_finetune_single_device config keys, written by trainplan (plan --emit torchtune): merge them\n"
      "# into the recipe's config for your model (tune cp), which holds the model, tokenizer and checkpointer.\n"
      "batch_size: {}\n"
      "gradient_accumulation_steps: {}\n"
      "tokenizer:\n  max_seq_len: {}\n"
      "dataset:\n  packed: False\n"
      "dtype: {}\n"
      "compile: {}\n"
      "enable_activation_checkpointing: {}\n"
      "enable_activation_offloading: False\n"
      "optimizer_in_bwd: False\n"
      "optimizer:\n{}  lr: {}  # {}: the learning rate (trainplan does not know it)\n"
      "loss:\n{}",
      r.micro_batch, r.grad_accum, r.seq,
      r.precision == precision_regime::fp32 ? "fp32" : "bf16", r.compile != compile_scope::none ? "True" : "False",
      r.recompute == recompute_mode::full ? "True" : "False", optimizer, placeholder, placeholder, loss);
}

// "-", and any name of the file standard output goes to (/dev/stdout, //dev/stdout, /proc/self/fd/1, or the
// file `> report.txt` made), would mix the config into the report printed there or rename it over the report.
bool names_stdout(const std::string& path) {
  if (path == "-") return true;
  struct stat named {}, out {};
  return ::stat(path.c_str(), &named) == 0 && ::fstat(STDOUT_FILENO, &out) == 0 && named.st_dev == out.st_dev &&
         named.st_ino == out.st_ino;
}

}  // namespace

emitted_config emit_config(const std::string& engine, const std::string& path, const model_spec& m,
                           const run_config& run) {
  if (path.empty()) throw input_error("--emit needs -o FILE");
  if (names_stdout(path)) throw input_error(fmt::format("--emit: -o {} is where the report goes: name another file", path));
  if (run.cp > 1) throw input_error(fmt::format("--emit {}: context parallelism (--cp {}) is not written into its config", engine, run.cp));
  emitted_config out;
  if (engine == "deepspeed") {
    out.files.push_back({path, deepspeed(run, out.notes).dump(2) + "\n"});
  } else if (engine == "fsdp") {
    out.files.push_back({path, accelerate_fsdp(run, out.notes)});
  } else if (engine == "torchtitan") {
    out.files.push_back({path, torchtitan(m, run, out.notes)});
  } else if (engine == "torchtune") {
    out.files.push_back({path, torchtune(m, run, out.notes)});
  } else if (engine == "hf-trainer") {
    out.files.push_back({path, hf_trainer(run, out.notes).dump(2) + "\n"});
    if (run.finetune != finetune_kind::full) {
      // The LoraConfig stands beside the arguments (TrainingArguments rejects unknown keys): a second file,
      // so -o must name one whose folder can hold it.
      const std::filesystem::path p(path);
      if (path.rfind("/dev/", 0) == 0 || path.rfind("/proc/", 0) == 0)
        throw input_error(fmt::format("--emit hf-trainer: with LoRA it writes a second file beside -o {}: name a regular file", path));
      out.files.push_back({(p.parent_path() / (p.stem().string() + ".lora.json")).string(), peft_config(m, run, out.notes).dump(2) + "\n"});
    }
  } else {
    throw input_error(fmt::format("--emit: unknown engine '{}' (known: {})", engine, emit_engine_names(", ")));
  }
  return out;
}

std::string emit_engine_names(std::string_view separator) {
  std::string names;
  for (std::string_view engine : {"deepspeed", "fsdp", "hf-trainer", "torchtitan", "torchtune"})
    names += fmt::format("{}{}", names.empty() ? "" : separator, engine);
  return names;
}

}  // namespace trainplan::cli
