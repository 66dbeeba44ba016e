#include "cli/emit_config.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "planner/input_error.hpp"

namespace trainplan::cli {
namespace {

using json = nlohmann::json;

bool is_bf16(const run_config& r) { return r.precision == precision_regime::bf16_mixed || r.precision == precision_regime::bf16 ||
                                           r.precision == precision_regime::amp_bf16 || r.precision == precision_regime::megatron_bf16; }
bool is_fp16(const run_config& r) { return r.precision == precision_regime::fp16_mixed; }
bool offloads_optimizer(const run_config& r) { return r.offload == offload_mode::optimizer || r.offload == offload_mode::both; }
bool offloads_params(const run_config& r) { return r.offload == offload_mode::params || r.offload == offload_mode::both; }

// Hugging Face module names of the LoRA targets (LlamaForCausalLM and GPT2LMHeadModel).
std::vector<std::string> hf_target_modules(const model_spec& m, unsigned t) {
  std::vector<std::string> out;
  if (m.family == model_family::gpt) {
    if (t & (lora_q | lora_k | lora_v)) out.push_back("c_attn");  // GPT-2 fuses q, k, v
    if (t & lora_o) out.push_back("attn.c_proj");
    if (t & lora_mlp) out.insert(out.end(), {"c_fc", "mlp.c_proj"});
  } else {
    if (t & lora_q) out.push_back("q_proj");
    if (t & lora_k) out.push_back("k_proj");
    if (t & lora_v) out.push_back("v_proj");
    if (t & lora_o) out.push_back("o_proj");
    if (t & lora_mlp) out.insert(out.end(), {"gate_proj", "up_proj", "down_proj"});
  }
  return out;
}

std::string hf_optim(optimizer_kind o) {
  switch (o) {
    case optimizer_kind::adamw: return "adamw_torch";
    case optimizer_kind::adamw_8bit: return "adamw_bnb_8bit";
    case optimizer_kind::adafactor: return "adafactor";
    case optimizer_kind::sgd: case optimizer_kind::sgd_momentum: return "sgd";
    case optimizer_kind::lion: return "lion_32bit";
  }
  return "adamw_torch";
}

json deepspeed(const run_config& r) {
  if (r.tp > 1 || r.pp > 1)
    throw input_error("--emit deepspeed: tensor and pipeline parallelism are Megatron-DeepSpeed's, not in a DeepSpeed config");
  json zero = {{"stage", r.zero}, {"overlap_comm", true}, {"contiguous_gradients", true}};
  if (offloads_optimizer(r)) zero["offload_optimizer"] = {{"device", "cpu"}, {"pin_memory", true}};
  if (offloads_params(r)) zero["offload_param"] = {{"device", "cpu"}, {"pin_memory", true}};
  json j = {{"train_batch_size", r.global_batch()},
            {"train_micro_batch_size_per_gpu", r.micro_batch},
            {"gradient_accumulation_steps", r.grad_accum},
            {"gradient_clipping", 1.0},
            {"bf16", {{"enabled", is_bf16(r)}}},
            {"fp16", {{"enabled", is_fp16(r)}, {"loss_scale", 0}, {"initial_scale_power", 16}}},
            {"zero_optimization", zero}};
  if (r.grad_dtype == grad_dtype_choice::fp32) j["data_types"] = {{"grad_accum_dtype", "fp32"}};
  if (r.optimizer == optimizer_kind::adamw)
    j["optimizer"] = {{"type", "AdamW"}, {"params", {{"lr", 3e-4}, {"betas", {0.9, 0.999}}, {"eps", 1e-8}, {"weight_decay", 0.01}}}};
  return j;
}

std::string accelerate_fsdp(const run_config& r) {
  if (r.zero == 1) throw input_error("--emit fsdp: FSDP has no ZeRO-1 (use --zero 2, 3 or 0)");
  if (r.tp > 1 || r.pp > 1) throw input_error("--emit fsdp: tensor and pipeline parallelism are not part of an Accelerate FSDP config");
  const char* strategy = r.zero >= 3 ? "FULL_SHARD" : r.zero == 2 ? "SHARD_GRAD_OP" : "NO_SHARD";
  return fmt::format(
      "# Hugging Face Accelerate config for PyTorch FSDP, written by trainplan (plan --emit fsdp).\n"
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
      "# per-GPU micro-batch {} with {} accumulation steps: pass them to your training script.\n",
      is_bf16(r) ? "bf16" : is_fp16(r) ? "fp16" : "no", r.gpus, strategy, r.offload != offload_mode::none ? "true" : "false",
      r.recompute == recompute_mode::full ? "true" : "false", r.micro_batch, r.grad_accum);
}

json hf_trainer(const run_config& r, const std::string& lora_path) {
  if (r.tp > 1 || r.pp > 1) throw input_error("--emit hf-trainer: the Trainer has no tensor or pipeline parallelism setting");
  if (r.zero == 1) throw input_error("--emit hf-trainer: ZeRO-1 needs a DeepSpeed config (--emit deepspeed)");
  json j = {{"output_dir", "./output"},
            {"per_device_train_batch_size", r.micro_batch},
            {"gradient_accumulation_steps", r.grad_accum},
            {"bf16", is_bf16(r)},
            {"fp16", is_fp16(r)},
            {"gradient_checkpointing", r.recompute == recompute_mode::full},
            {"optim", hf_optim(r.optimizer)}};
  if (r.zero >= 2)
    j["fsdp"] = std::string(r.zero >= 3 ? "full_shard" : "shard_grad_op") + " auto_wrap" +
                (r.offload != offload_mode::none ? " offload" : "");
  if (!lora_path.empty()) j["_lora_config"] = lora_path;
  return j;
}

std::string torchtitan(const model_spec& m, const run_config& r) {
  if (r.finetune != finetune_kind::full) throw input_error("--emit torchtitan: torchtitan pre-trains; it has no LoRA");
  if (r.offload != offload_mode::none) throw input_error("--emit torchtitan: torchtitan does not offload to CPU");
  const std::uint64_t dp = r.data_parallel();
  // FSDP2 shards over data_parallel_shard_degree; ZeRO 0/1 has no sharding, so it replicates.
  const std::uint64_t shard = r.zero >= 2 ? dp : 1, replicate = r.zero >= 2 ? 1 : dp;
  const char* ac = r.recompute == recompute_mode::full ? "full" : r.recompute == recompute_mode::selective ? "selective" : "none";
  return fmt::format(
      "# torchtitan train config, written by trainplan (plan --emit torchtitan). Set [model] flavor to your model's.\n"
      "[model]\nname = \"{}\"\n\n"
      "[training]\nlocal_batch_size = {}\nglobal_batch_size = {}\nseq_len = {}\nmixed_precision_param = \"{}\"\n\n"
      "[parallelism]\ndata_parallel_replicate_degree = {}\ndata_parallel_shard_degree = {}\ntensor_parallel_degree = {}\n"
      "pipeline_parallel_degree = {}\n"
      "enable_async_tensor_parallel = false\n\n"
      "[activation_checkpoint]\nmode = \"{}\"\nselective_ac_option = \"op\"\n\n"
      "[optimizer]\nname = \"AdamW\"\nlr = 3e-4\n",
      m.family == model_family::llama ? "llama3" : "gpt", r.micro_batch, r.global_batch(), r.seq,
      is_fp16(r) ? "float16" : r.precision == precision_regime::fp32 ? "float32" : "bfloat16", replicate, shard, r.tp, r.pp, ac);
}

}  // namespace

std::vector<emitted_file> emit_config(const std::string& engine, const std::string& path, const model_spec& m,
                                      const run_config& run) {
  if (path.empty()) throw input_error("--emit needs -o FILE");
  if (engine == "deepspeed") return {{path, deepspeed(run).dump(2) + "\n"}};
  if (engine == "fsdp") return {{path, accelerate_fsdp(run)}};
  if (engine == "torchtitan") return {{path, torchtitan(m, run)}};
  if (engine == "hf-trainer") {
    std::vector<emitted_file> files;
    std::string lora_path;
    if (run.finetune != finetune_kind::full) {
      const std::filesystem::path p(path);
      lora_path = (p.parent_path() / (p.stem().string() + ".lora.json")).string();
      json lora = {{"lora_config", {{"r", run.lora_rank}, {"lora_alpha", 2 * run.lora_rank}, {"lora_dropout", run.lora_dropout},
                                    {"target_modules", hf_target_modules(m, run.lora_targets)}, {"task_type", "CAUSAL_LM"}}}};
      if (run.finetune == finetune_kind::qlora)
        lora["bnb_config"] = {{"load_in_4bit", true}, {"bnb_4bit_quant_type", "nf4"}, {"bnb_4bit_use_double_quant", true},
                              {"bnb_4bit_compute_dtype", "bfloat16"}};
      files.push_back({lora_path, lora.dump(2) + "\n"});
    }
    json args = hf_trainer(run, lora_path);
    args.erase("_lora_config");  // TrainingArguments rejects unknown keys; the LoRA file stands beside it
    files.insert(files.begin(), {path, args.dump(2) + "\n"});
    return files;
  }
  throw input_error(fmt::format("--emit: unknown engine '{}' (known: deepspeed, fsdp, hf-trainer, torchtitan)", engine));
}

}  // namespace trainplan::cli
