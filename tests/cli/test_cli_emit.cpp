// plan --emit, run as a user runs it: the engines' configs it writes (DeepSpeed, FSDP through Accelerate, the HF
// Trainer, torchtitan), what it refuses and what it says on stderr that no config key holds.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expect_refused.hpp"
#include "run_plan.hpp"

using namespace trainplan::test;
using json = nlohmann::json;

TEST_CASE("option --emit writes configs for DeepSpeed, FSDP (Accelerate), the HF Trainer and torchtitan", "[cli][emit]") {
  const auto dir = trainplan::test::scratch_dir("trainplan-emit");
  const std::string plan7b = "--params 7B --seq 4096 --gpu h100 --micro-batch 2 --grad-accum 4 --framework trainplan ";

  REQUIRE(run_plan(plan7b + "--gpus 8 --zero 3 --offload optimizer --emit deepspeed -o " + (dir / "ds.json").string())
              .exit_code == 0);
  json ds = json::parse(slurp(dir / "ds.json"));
  CHECK(ds["train_micro_batch_size_per_gpu"] == 2);
  CHECK(ds["gradient_accumulation_steps"] == 4);
  CHECK(ds["train_batch_size"] == 2 * 4 * 8);
  CHECK(ds["zero_optimization"]["stage"] == 3);
  CHECK(ds["zero_optimization"]["offload_optimizer"]["device"] == "cpu");
  CHECK_FALSE(ds["zero_optimization"].contains("offload_param"));
  CHECK(ds["bf16"]["enabled"] == true);
  run_plan(plan7b + "--gpus 4 --zero 2 --grad-dtype fp32 --emit deepspeed -o " + (dir / "ds2.json").string());
  CHECK(json::parse(slurp(dir / "ds2.json"))["data_types"]["grad_accum_dtype"] == "fp32");

  REQUIRE(run_plan(plan7b + "--gpus 4 --fsdp full --recompute full --emit fsdp -o " + (dir / "fsdp.yaml").string()).exit_code == 0);
  const std::string fsdp = slurp(dir / "fsdp.yaml");
  CHECK_THAT(fsdp, Catch::Contains("distributed_type: FSDP") && Catch::Contains("fsdp_sharding_strategy: FULL_SHARD") &&
                       Catch::Contains("num_processes: 4") && Catch::Contains("fsdp_activation_checkpointing: true") &&
                       Catch::Contains("mixed_precision: bf16"));

  REQUIRE(run_plan("--params 7B --seq 1024 --gpu a10g --finetune lora --lora-targets q,v,mlp --recompute full "
                   "--micro-batch 4 --grad-accum 8 --emit hf-trainer -o " + (dir / "args.json").string()).exit_code == 0);
  json args = json::parse(slurp(dir / "args.json"));
  CHECK(args["per_device_train_batch_size"] == 4);
  CHECK(args["gradient_accumulation_steps"] == 8);
  CHECK(args["gradient_checkpointing"] == true);
  CHECK(args["bf16"] == true);
  json lora = json::parse(slurp(dir / "args.lora.json"));
  CHECK(lora["lora_config"]["r"] == 16);
  CHECK(lora["lora_config"]["target_modules"] == json({"q_proj", "v_proj", "gate_proj", "up_proj", "down_proj"}));
  CHECK(lora["lora_config"]["lora_dropout"] == 0.0);  // what the plan assumed: --lora-dropout's default, peft's
  // The allocator's setting is the job's environment, which no config file holds: said on stderr.
  const plan_run expandable = run_plan("--model gpt2 --seq 1024 --gpu h100 --expandable-segments --emit hf-trainer -o " +
                                       (dir / "args2.json").string());
  CHECK_THAT(expandable.err, Catch::Contains("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: set it in the training job's environment"));
  CHECK_FALSE(json::parse(slurp(dir / "args2.json")).contains("expandable_segments"));  // TrainingArguments has no such key

  REQUIRE(run_plan("--model llama-3.1-8b --seq 8k --gpu h100 --gpus 16 --tp 2 --zero 3 --recompute full --framework trainplan --emit torchtitan -o " +
                   (dir / "tt.toml").string()).exit_code == 0);
  const std::string tt = slurp(dir / "tt.toml");
  CHECK_THAT(tt, Catch::Contains("seq_len = 8192") && Catch::Contains("data_parallel_shard_degree = 8") &&
                     Catch::Contains("pipeline_parallel_degree = 1") && Catch::Contains("fsdp_reshard_after_forward = \"always\"") &&
                     Catch::Contains("tensor_parallel_degree = 2") && Catch::Contains("mode = \"full\"") &&
                     Catch::Contains("global_batch_size = 8") && Catch::Contains("local_batch_size = 1"));

  for (const char* bad : {"--model gpt2 --emit megatron -o /tmp/x", "--model gpt2 --emit deepspeed",
                          "--model gpt2 --gpus 2 --zero 1 --emit fsdp -o /tmp/x.yaml",
                          "--model gpt2 --finetune lora --emit torchtitan -o /tmp/x.toml", "--model gpt2 -o /tmp/x.json"}) {
    expect_refused(bad);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("option --emit refuses a plan that does not fit, in one line, unless --force", "[cli][emit]") {
  const auto dir = trainplan::test::scratch_dir("trainplan-emit-fit");
  const std::string too_big = "--params 7B --seq 4096 --gpu h100 --emit deepspeed -o " + (dir / "ds.json").string();
  expect_refused(too_big, {"--emit deepspeed", "does not fit", "--force"});
  CHECK_FALSE(std::filesystem::exists(dir / "ds.json"));
  // Forced: written, with a warning; the exit code is still the verdict's.
  const plan_run forced = run_plan(too_big + " --force");
  CHECK(forced.exit_code == 1);
  CHECK_THAT(forced.err, Catch::Contains("warning: --force") && Catch::Contains("does not fit"));
  CHECK(std::filesystem::exists(dir / "ds.json"));
  CHECK_THAT(forced.out, Catch::Contains("DOES NOT FIT"));
  // What the engine cannot express is said first, forced or not; --force alone is a mistake.
  expect_refused("--params 7B --seq 4096 --gpu h100 --tp 2 --gpus 2 --framework megatron --emit deepspeed --force -o " +
                     (dir / "tp.json").string(),
                 {"tensor and pipeline parallelism"});
  expect_refused("--params 7B --seq 4096 --gpu h100 --force", {"--force"});
  std::filesystem::remove_all(dir);
}

TEST_CASE("option --emit writes the hyperparameters the plan cannot know as SET_ME, and says so", "[cli][emit]") {
  const auto dir = trainplan::test::scratch_dir("trainplan-emit-placeholders");
  const std::string fits = "--params 1B --seq 2048 --gpu h100 --gpus 8 --zero 3 ";
  const plan_run ds = run_plan(fits + "--emit deepspeed -o " + (dir / "ds.json").string());
  REQUIRE(ds.exit_code == 0);
  const json d = json::parse(slurp(dir / "ds.json"));
  CHECK(d["optimizer"]["params"]["lr"] == "SET_ME");
  CHECK(d["optimizer"]["params"]["weight_decay"] == "SET_ME");
  CHECK(d["gradient_clipping"] == "SET_ME");
  CHECK(d["scheduler"]["params"]["warmup_num_steps"] == "SET_ME");
  CHECK(d["optimizer"]["params"]["eps"] == 1e-8);  // AdamW's own constant stays
  CHECK_THAT(ds.err, Catch::Contains("note: deepspeed:") && Catch::Contains("\"SET_ME\"") && Catch::Contains("gradient_clipping"));

  const plan_run hf = run_plan(fits + "--finetune lora --emit hf-trainer -o " + (dir / "args.json").string());
  REQUIRE(hf.exit_code == 0);
  const json a = json::parse(slurp(dir / "args.json"));
  for (const char* key : {"learning_rate", "weight_decay", "max_grad_norm", "warmup_steps"}) CHECK(a[key] == "SET_ME");
  CHECK(json::parse(slurp(dir / "args.lora.json"))["lora_config"]["lora_alpha"] == "SET_ME");
  CHECK_THAT(hf.err, Catch::Contains("learning_rate") && Catch::Contains("lora_alpha"));

  const plan_run tt = run_plan(fits + "--framework trainplan --emit torchtitan -o " + (dir / "tt.toml").string());
  REQUIRE(tt.exit_code == 0);
  const std::string toml = slurp(dir / "tt.toml");
  CHECK_THAT(toml, Catch::Contains("lr = \"SET_ME\"  # SET_ME") && Catch::Contains("warmup_steps = \"SET_ME\"") &&
                       Catch::Contains("max_norm = \"SET_ME\""));
  CHECK_THAT(toml, !Catch::Contains("3e-4"));
  CHECK_THAT(tt.err, Catch::Contains("note: torchtitan:") && Catch::Contains("SET_ME"));

  const plan_run fsdp = run_plan(fits + "--emit fsdp -o " + (dir / "fsdp.yaml").string());
  REQUIRE(fsdp.exit_code == 0);
  CHECK_THAT(slurp(dir / "fsdp.yaml"), Catch::Contains("# SET_ME in your training script: learning rate"));
  CHECK_THAT(fsdp.err, Catch::Contains("learning rate"));
  std::filesystem::remove_all(dir);
}

// Each case is a plan an engine would have run differently from what was planned, without a word, before an
// audit against the engines' sources (cli/emit_config.cpp names them).
TEST_CASE("option --emit writes what the engine runs as planned, or says why it cannot", "[cli][emit]") {
  const auto dir = trainplan::test::scratch_dir("trainplan-emit-engines");
  const auto emit = [&](const std::string& flags, const std::string& file) {
    INFO("plan " << flags);
    const plan_run r = run_plan(flags + " -o " + (dir / file).string());
    REQUIRE(r.exit_code == 0);
    return r;
  };
  // fp16 autocast (hf's amp-fp16) is fp16 in every engine that has it: DeepSpeed's torch_autocast keeps the
  // fp32 model, as autocast does; its fp16 mode would cast the model.
  const std::string amp_fp16 = "--params 1B --seq 2048 --gpu h100 --gpus 8 --zero 3 --precision amp-fp16 --emit ";
  CHECK_THAT(emit(amp_fp16 + "deepspeed", "fp16.json").err, Catch::Contains("torch_autocast"));
  json ds = json::parse(slurp(dir / "fp16.json"));
  CHECK(ds["torch_autocast"] == json({{"enabled", true}, {"dtype", "float16"}}));
  CHECK(ds["fp16"]["enabled"] == false);
  CHECK(ds["bf16"]["enabled"] == false);
  emit(amp_fp16 + "hf-trainer", "fp16-args.json");
  json args = json::parse(slurp(dir / "fp16-args.json"));
  CHECK(args["fp16"] == true);
  CHECK(args["bf16"] == false);
  emit(amp_fp16 + "fsdp", "fp16.yaml");
  CHECK_THAT(slurp(dir / "fp16.yaml"), Catch::Contains("mixed_precision: fp16"));
  // Cast 16-bit modes stay cast; pure bf16 is said to differ (DeepSpeed keeps an fp32 master copy).
  CHECK_THAT(emit("--params 1B --gpu h100 --gpus 8 --zero 3 --precision bf16 --emit deepspeed", "bf16.json").err,
             Catch::Contains("fp32 master copy"));
  CHECK(json::parse(slurp(dir / "bf16.json"))["bf16"]["enabled"] == true);
  CHECK_THAT(emit("--params 1B --gpu h100 --gpus 2 --zero 0 --framework trainplan --emit deepspeed", "z0.json").err,
             Catch::Contains("accumulates gradients in fp32"));

  // The Trainer: fused AdamW by its own name; QLoRA under FSDP stores its 4-bit weights in bf16.
  emit("--params 7B --gpu h100 --optimizer-impl fused --precision bf16 --emit hf-trainer", "fused.json");
  CHECK(json::parse(slurp(dir / "fused.json"))["optim"] == "adamw_torch_fused");
  emit("--params 7B --gpu h100 --gpus 8 --zero 3 --finetune qlora --emit hf-trainer", "qlora.json");
  json qlora = json::parse(slurp(dir / "qlora.lora.json"));
  CHECK(qlora["bnb_config"]["bnb_4bit_quant_storage"] == "bfloat16");
  // What the plan assumed and no config key selects is said: flash-attn, the loss, packing.
  const std::string said = emit("--model llama-3.2-1b --seq 4096 --gpu h100 --attention flash_attention_2 --loss fused-linear "
                                "--packing 1024 --precision bf16 --emit hf-trainer", "said.json").err;
  CHECK_THAT(said, Catch::Contains("attn_implementation=\"flash_attention_2\"") &&
                       Catch::Contains("fused_linear_cross_entropy=True") && Catch::Contains("--packing 1024"));
  CHECK_THAT(emit("--model llama-3.2-1b --seq 4096 --gpu h100 --gpus 8 --zero 3 --loss chunked --emit fsdp", "chunked.yaml").err,
             Catch::Contains("8 chunks"));
  // Multi-head latent attention's projections, as planner/run/lora.cpp counts them.
  emit("--model deepseek-v3 --gpu h100 --gpus 64 --zero 3 --seq 1024 --recompute full --finetune lora --emit hf-trainer", "mla.json");
  CHECK(json::parse(slurp(dir / "mla.lora.json"))["lora_config"]["target_modules"] ==
        json({"q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"}));

  // torchtitan: pipelined, the accumulation micro-batches are the pipeline's microbatches; ZeRO-2 keeps the
  // gathered weights (no reshard); pure bf16 has no fp32 copy; fp8 is its float8 converter.
  emit("--params 7B --seq 4096 --gpu h100 --gpus 8 --pp 4 --framework megatron --zero 3 --grad-accum 8 --emit torchtitan", "pp.toml");
  CHECK_THAT(slurp(dir / "pp.toml"), Catch::Contains("local_batch_size = 8") && Catch::Contains("global_batch_size = 16") &&
                                         Catch::Contains("pipeline_parallel_microbatch_size = 1"));
  emit("--params 7B --gpu h100 --gpus 8 --zero 2 --framework trainplan --precision bf16 --emit torchtitan", "z2.toml");
  CHECK_THAT(slurp(dir / "z2.toml"), Catch::Contains("fsdp_reshard_after_forward = \"never\"") &&
                                         Catch::Contains("dtype = \"bfloat16\""));
  emit("--params 1B --gpu h100 --gpus 8 --zero 3 --framework trainplan --precision fp8-mixed --emit torchtitan", "fp8.toml");
  CHECK_THAT(slurp(dir / "fp8.toml"), Catch::Contains("converters = [\"float8\"]"));
  emit("--params 1B --gpu h100 --gpus 8 --zero 3 --offload both --emit torchtitan", "offload.toml");
  CHECK_THAT(slurp(dir / "offload.toml"), Catch::Contains("enable_cpu_offload = true"));
  // Under fsdp2, --recompute selective is torchtitan's per-op policy: its own option.
  emit("--model llama-3.1-8b --seq 8192 --gpu h100 --gpus 8 --framework fsdp2 --recompute selective --emit torchtitan", "sac.toml");
  CHECK_THAT(slurp(dir / "sac.toml"), Catch::Contains("mode = \"selective\"\nselective_ac_option = \"op\""));

  // What an engine cannot express is refused (exit 2, one line), and nothing is written.
  const std::string out = " -o " + (dir / "refused.cfg").string();
  for (const std::string bad : {
           "--params 1B --gpus 8 --zero 3 --framework trainplan --precision fp8-mixed --emit deepspeed",
           "--model qwen3-30b-a3b --gpus 8 --ep 8 --zero 1 --seq 2048 --emit deepspeed",
           "--params 7B --gpus 4 --zero 0 --offload optimizer --emit hf-trainer",
           "--params 7B --gpus 4 --zero 0 --offload optimizer --emit deepspeed",
           "--params 7B --gpus 8 --zero 0 --framework trainplan --precision fp16-mixed --grad-dtype fp32 --emit deepspeed",
           "--params 7B --gpus 8 --zero 2 --optimizer adafactor --offload optimizer --emit deepspeed",
           "--params 7B --gpus 8 --tp 2 --framework megatron --zero 0 --emit torchtitan",
           "--params 1B --family gpt --gpus 8 --zero 3 --framework trainplan --emit torchtitan",
           "--params 1B --gpus 8 --zero 3 --precision amp-fp16 --emit torchtitan",
           "--params 7B --gpus 8 --zero 3 --optimizer sgd --emit torchtitan",
           "--params 7B --gpus 8 --zero 1 --emit torchtitan",
           "--params 7B --gpus 8 --zero 3 --framework trainplan --recompute selective --emit torchtitan",
           "--model mixtral-8x7b --gpus 8 --zero 3 --emit torchtitan",
           "--params 7B --gpus 4 --zero 2 --offload optimizer --emit fsdp",
           "--params 7B --gpus 4 --zero 3 --offload params --emit hf-trainer",
           "--params 7B --gpus 8 --zero 3 --framework trainplan --recompute selective --emit fsdp",
           "--params 7B --gpus 8 --zero 3 --framework trainplan --recompute selective --emit hf-trainer",
           "--params 7B --optimizer sgd-momentum --emit hf-trainer",
           "--model mixtral-8x7b --finetune lora --lora-targets q,mlp --gpus 8 --zero 3 --emit hf-trainer"}) {
    expect_refused(bad + out, {"--emit"});
    CHECK_FALSE(std::filesystem::exists(dir / "refused.cfg"));
  }
  // The report goes to stdout: the config never joins it there (and LoRA's second file is no '-.lora.json').
  expect_refused("--params 1B --finetune lora --emit hf-trainer -o -", {"-o -"});
  expect_refused("--params 1B --emit deepspeed -o /dev/stdout --json", {"/dev/stdout"});
  CHECK_FALSE(std::filesystem::exists("-.lora.json"));
  // A plan parallel in tensors or stages alone has no DDP beside them: emitted (torchtitan rejects DDP only
  // beside other dimensions). A pipeline needs a microbatch per stage.
  emit("--params 7B --seq 4096 --gpu h100 --gpus 2 --tp 2 --framework megatron --emit torchtitan", "tp.toml");
  CHECK_THAT(slurp(dir / "tp.toml"), Catch::Contains("tensor_parallel_degree = 2") && Catch::Contains("data_parallel_replicate_degree = 1"));
  expect_refused("--params 7B --seq 4096 --gpu h100 --gpus 4 --pp 4 --framework megatron --zero 3 --emit torchtitan" + out,
                 {"microbatch per stage"});
  // Models torchtitan does not have: Qwen2's biases, a window shorter than the sequence, Gemma 2.
  for (const std::string model : {"qwen2.5-7b", "gemma-2-9b"})
    expect_refused("--model " + model + " --seq 8192 --gpu h100 --gpus 8 --zero 3 --emit torchtitan" + out, {"torchtitan has no"});
  // What the script sets when it loads the model is said on stderr; FSDP's optimizer is the script's.
  CHECK_THAT(emit("--params 1B --gpu h100 --gpus 8 --zero 3 --attention eager --optimizer-impl fused --emit fsdp", "eager.yaml").err,
             Catch::Contains("attn_implementation=\"eager\"") && Catch::Contains("the plan assumes adamw (fused)"));
  // A second file refused leaves the first unwritten: -o x.json when x.lora.json is this run's --hf-config.
  std::filesystem::copy_file(fixture("hf/llama-3.2-1b.json"), dir / "cfg.lora.json");
  expect_refused("--hf-config " + (dir / "cfg.lora.json").string() + " --seq 1024 --gpu h100 --finetune lora --emit hf-trainer -o " +
                     (dir / "cfg.json").string(),
                 {"reads it as an input"});
  CHECK_FALSE(std::filesystem::exists(dir / "cfg.json"));
  expect_refused("--params 1B --emit deepspeed -o //dev/stdout", {"where the report goes"});
  // Phi-3's fused projections are one module each (naming q adapts qkv_proj, as the plan counts it).
  emit("--model phi-3-mini --gpu h100 --finetune lora --lora-targets q,o,mlp --emit hf-trainer", "phi3.json");
  CHECK(json::parse(slurp(dir / "phi3.lora.json"))["lora_config"]["target_modules"] ==
        json({"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}));
  std::filesystem::remove_all(dir);
}
