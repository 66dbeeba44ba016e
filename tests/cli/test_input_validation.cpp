// Input validation audit: each bad input below once gave a wrong or meaningless answer (nan, +inf%, a
// model 870,000 times the size asked for, a value silently ignored or cut). Each must now be refused with
// one line on stderr that names the file and field, or the option, and exit code 2.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <nlohmann/json.hpp>

#include "tests/cli/expect_refused.hpp"
#include "tests/cli/run_plan.hpp"

using trainplan::test::expect_refused;
using trainplan::test::fixture;
using trainplan::test::one_line;
using trainplan::test::plan_run;
using trainplan::test::run_plan;
using trainplan::test::slurp;

namespace {

std::filesystem::path fresh_dir(const std::string& name) {
  return trainplan::test::scratch_dir("trainplan-validation-" + name);
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto pos = text.find(from);
  REQUIRE(pos != std::string::npos);
  return text.replace(pos, from.size(), to);
}

// The shared H100 collector report with one value replaced, written to a file of its own.
std::string measurement_file(const std::string& name, const std::string& from, const std::string& to) {
  const std::string text = slurp(fixture("measurements/pytorch-hf-h100-2026-11-22.jsonl"));
  const auto path = fresh_dir("measurements") / name;
  std::ofstream(path) << replaced(text, from, to);
  return path.string();
}

// Text of a field's first value in the shared report ("step_s" -> "0.0682..."), up to the next comma or brace.
std::string first_value(const std::string& field) {
  const std::string text = slurp(fixture("measurements/pytorch-hf-h100-2026-11-22.jsonl"));
  const std::string key = "\"" + field + "\": ";
  const auto start = text.find(key);
  REQUIRE(start != std::string::npos);
  const auto end = text.find_first_of(",}", start);
  return text.substr(start, end - start);
}

// A Hugging Face config from tests/data/hf with one key set to a JSON value (added when absent).
std::string hf_config_with(const std::string& base, const std::string& key, const std::string& value) {
  std::string text = slurp(fixture("hf/" + base));
  const std::string quoted = "\"" + key + "\":";
  const auto at = text.find(quoted);
  if (at == std::string::npos) {
    text = replaced(text, "{", "{\"" + key + "\": " + value + ", ");
  } else {
    const auto value_start = at + quoted.size();
    const auto value_end = text.find_first_of(",}\n", value_start);
    text.replace(value_start, value_end - value_start, " " + value);
  }
  const auto path = fresh_dir("hf") / (key + "-" + std::to_string(std::hash<std::string>{}(value)) + "-" + base);
  std::ofstream(path) << text;
  return path.string();
}

}  // namespace

TEST_CASE("calibration efficiencies near zero are refused, never a nan step time", "[cli][errors][validation]") {
  const auto dir = fresh_dir("calibration");
  for (const std::string key : {"attention_efficiency", "bandwidth_fraction", "gemm_efficiency", "fp32_gemm_efficiency"})
    for (const std::string value : {"1e-320", "1e-200", "0.0005"}) {
      std::ofstream(dir / "calibration.json") << "{\"gpus\": {\"h100\": {\"profiles\": {\"hf\": {\"timing\": {\"" + key + "\": " + value + "}}}}}}";
      expect_refused("--model gpt2 --framework hf --data-dir " + dir.string(),
                     {"calibration.json", key, "must be within [0.001, 1]"});
    }
  // The bound itself is a (very slow) GPU, and the report stays finite.
  std::ofstream(dir / "calibration.json") << R"({"gpus": {"h100": {"profiles": {"hf": {"timing": {"attention_efficiency": 0.001,
    "bandwidth_fraction": 0.001, "gemm_efficiency": 0.001}}}}}})";
  const plan_run r = run_plan("--model gpt2 --framework hf --data-dir " + dir.string());
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, !Catch::Contains("nan") && !Catch::Contains("unknown") && !Catch::Contains("inf%"));
}

TEST_CASE("collector reports with impossible measurements are refused by check and calibrate", "[cli][errors][validation]") {
  const std::string step = first_value("step_s"), reserved = first_value("reserved_peak"),
                    alloc = first_value("alloc_peak"), context = first_value("context_bytes"),
                    total = first_value("gpu_total_bytes");
  const struct {
    std::string from, to, field;
  } cases[] = {
      {step, "\"step_s\": 0", "step_s"},
      {step, "\"step_s\": -1", "step_s"},
      {step, "\"step_s\": 18446744073709551616", "step_s"},
      {step, "\"step_s\": 86400", "step_s"},
      {step, "\"step_s\": 1e-300", "step_s"},  // no step is shorter than a kernel launch
      {reserved, "\"reserved_peak\": 0", "reserved_peak"},
      {reserved, "\"reserved_peak\": 1000", "reserved_peak"},
      {reserved, "\"reserved_peak\": 18446744073709551615", "reserved_peak"},  // + context wrapped to 0.60 GiB
      {"\"V\": 50257}", "\"V\": 50257, \"tied\": \"true\"}", "tied"},  // not a boolean: was read as untied
      {alloc, "\"alloc_peak\": 0", "alloc_peak"},
      {context, "\"context_bytes\": 9223372036854775808", "context_bytes"},
      {context, "\"context_bytes\": 0", "context_bytes"},
      {total, "\"gpu_total_bytes\": 0", "gpu_total_bytes"},
  };
  const auto out_dir = fresh_dir("calibrate-out");
  for (const auto& c : cases) {
    const std::string file = measurement_file("bad.jsonl", c.from, c.to);
    expect_refused("check " + file, {"bad.jsonl line ", "'" + c.field + "'"});
    // calibrate reads the same file: the input's error, not the fitted constant the output file would refuse.
    expect_refused("calibrate --framework hf " + file + " -o " + (out_dir / "calibration.json").string(),
                   {"bad.jsonl line ", "'" + c.field + "'"});
    CHECK_FALSE(std::filesystem::exists(out_dir / "calibration.json"));
  }
}

TEST_CASE("a collector report's out-of-memory lines still parse without measured phases", "[cli][validation]") {
  // The collector writes "oom": true and only the phases it reached: no step time, no peaks.
  const std::string text = slurp(fixture("measurements/pytorch-hf-h100-2026-11-22.jsonl"));
  const auto path = fresh_dir("oom") / "oom.jsonl";
  const std::string env = text.substr(0, text.find('\n') + 1);
  std::ofstream(path) << env
                      << R"({"id": "O1", "seq": 1024, "mbs": 512, "regime": "amp-bf16", "attn": "sdpa", "gc": false, "drop": 0.1,)"
                         R"( "params": 124439808, "oom": true, "oom_phase": "forward", "phases": {"before_step": 1573277696},)"
                         R"( "model": {"fam": "gpt2", "L": 12, "h": 768, "a": 12, "V": 50257}})"
                      << "\n";
  const plan_run r = run_plan("check " + path.string());
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("ran out of memory; plan says it does not fit"));
}

TEST_CASE("plan check refuses nan and negative tolerances", "[cli][errors][validation]") {
  const std::string report = fixture("measurements/pytorch-hf-h100-2026-11-22.jsonl");
  for (const std::string option : {"--tensor-tolerance", "--device-tolerance", "--time-tolerance"})
    for (const std::string value : {"nan", "-nan", "-1", "inf"}) expect_refused("check " + report + " " + option + " " + value, {option});
}

TEST_CASE("plan validate refuses more steps than it runs", "[cli][errors][validation]") {
  expect_refused("validate --model gpt2 --steps 1000000000 --no-report", {"--steps", "1000"});
  expect_refused("validate --model gpt2 --steps 1001 --no-report", {"--steps", "1000"});
}

TEST_CASE("hf configs with unmodelled activations, bad dropouts or positions are refused", "[cli][errors][validation]") {
  for (const std::string act : {"\"relu\"", "\"gelu\"", "123"})
    expect_refused("--hf-config " + hf_config_with("gpt2.json", "activation_function", act), {"gpt2.json", "activation_function"});
  for (const std::string base : {"llama-3.2-1b.json", "mistral-7b.json", "qwen2.5-7b.json", "mixtral-8x7b.json",
                                 "qwen3-30b-a3b.json", "qwen1.5-moe-a2.7b.json", "deepseek-v3.json", "phi-3-mini-4k.json"})
    expect_refused("--hf-config " + hf_config_with(base, "hidden_act", "\"gelu\""), {base, "hidden_act"});
  for (const std::string key : {"attn_pdrop", "embd_pdrop", "resid_pdrop"})
    for (const std::string value : {"-3", "\"abc\"", "1099511627776", "1"})
      expect_refused("--hf-config " + hf_config_with("gpt2.json", key, value), {"gpt2.json", key});
  expect_refused("--hf-config " + hf_config_with("llama-3.2-1b.json", "attention_dropout", "-0.5"),
                 {"llama-3.2-1b.json", "attention_dropout"});
  // One dropout rate is modelled: a site without dropout beside ones with it keeps different masks.
  expect_refused("--hf-config " + hf_config_with("gpt2.json", "attn_pdrop", "0"), {"gpt2.json", "attn_pdrop"});
  for (const std::string value : {"{}", "-1", "\"x\"", "0"}) {
    expect_refused("--hf-config " + hf_config_with("llama-3.2-1b.json", "max_position_embeddings", value),
                   {"llama-3.2-1b.json", "max_position_embeddings"});
    expect_refused("--hf-config " + hf_config_with("gpt2.json", "n_positions", value), {"gpt2.json", "n_positions"});
    expect_refused("--hf-config " + hf_config_with("gpt2.json", "max_position_embeddings", value),
                   {"gpt2.json", "max_position_embeddings"});
  }
  // What the real configs say is still read.
  CHECK(run_plan("--hf-config " + hf_config_with("gpt2.json", "activation_function", "\"gelu_new\"")).exit_code == 0);
  CHECK(run_plan("--hf-config " + hf_config_with("gpt2.json", "max_position_embeddings", "1024")).exit_code == 0);
}

TEST_CASE("a params count below the smallest derived shape is refused with the smallest count", "[cli][errors][validation]") {
  for (const std::string params : {"1", "1k", "1M", "5M"}) expect_refused("--params " + params, {"--params", "8,716,928"});
  CHECK(run_plan("--params 9M").exit_code == 0);  // within 3% of the smallest shape
  CHECK(run_plan("--params 2B").exit_code == 0);
}

TEST_CASE("data-dir file errors name the file once, and a preset's family names the file", "[cli][errors][validation]") {
  const auto dir = fresh_dir("data-dir");
  std::filesystem::create_directories(dir / "gpus.json");  // a folder where a file should be
  const plan_run r = run_plan("--model gpt2 --data-dir " + dir.string());
  CHECK(r.exit_code == 2);
  CHECK(one_line(r.err));
  const std::string path = (dir / "gpus.json").string();
  CHECK_THAT(r.err, Catch::Contains(path));
  CHECK(r.err.find(path) == r.err.rfind(path));  // once
  std::filesystem::remove_all(dir / "gpus.json");
  std::ofstream(dir / "models.json") << R"({"models": [{"name": "b1", "family": "bert", "nominal_params": "1M", "layers": 2,
    "hidden": 64, "heads": 4, "kv_heads": 4, "ffn": 256, "vocab": 100, "max_positions": 64, "tied_embeddings": true,
    "dropout": 0.0, "source": "test"}]})";
  expect_refused("--model gpt2 --data-dir " + dir.string(), {path.substr(0, path.size() - 9) + "models.json", "models[0]", "'family'", "bert"});
  const plan_run slash = run_plan("--model gpt2 --data-dir " + dir.string() + "/");
  CHECK_THAT(slash.err, !Catch::Contains("//"));
}

TEST_CASE("a sequence or micro-batch too large for 64 bits is named", "[cli][errors][validation]") {
  expect_refused("--model llama-2-7b --seq 9223372036854775808", {"--seq 9223372036854775808", "64 bits"});
  expect_refused("--model llama-2-7b --seq 4096 --micro-batch 4611686018427387904", {"--micro-batch 4611686018427387904", "64 bits"});
  expect_refused("--model llama-2-7b --seq 4096 --micro-batch 1099511627776", {"--micro-batch 1099511627776", "64 bits"});
  expect_refused("--model llama-2-7b --attention eager --seq 4294967296", {"--seq 4294967296", "eager", "64 bits"});
}

TEST_CASE("options the run ignores are noted, not silently dropped", "[cli][validation]") {
  const plan_run r = run_plan("--model gpt2 --seq 1024 --gpu h100 --lora-rank 8 --lora-targets q,v --sequence-parallel");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("note   --lora-rank has no effect without --finetune lora or qlora") &&
                        Catch::Contains("note   --lora-targets has no effect") &&
                        Catch::Contains("note   --sequence-parallel has no effect without --tp above 1"));
  CHECK_THAT(run_plan("--model gpt2 --seq 1024 --gpu h100 --finetune lora --lora-dtype model --framework trainplan").out,
             Catch::Contains("--lora-dtype has no effect under --framework trainplan"));
  CHECK_THAT(run_plan("--model gpt2 --seq 1024 --gpu h100 --lora-dropout 0.05").out,
             Catch::Contains("note   --lora-dropout has no effect without --finetune lora or qlora"));
  CHECK_THAT(run_plan("--model gpt2 --seq 1024 --gpu h100 --finetune lora --lora-dropout 0.05 --framework megatron").out,
             Catch::Contains("--lora-dropout has no effect under --framework megatron"));
  // Given where they act, nothing is noted.
  CHECK_THAT(run_plan("--model gpt2 --seq 1024 --gpu h100 --finetune lora --lora-rank 8 --lora-dtype model --lora-dropout 0.1").out,
             !Catch::Contains("has no effect"));
}

TEST_CASE("absurd cluster sizes, LoRA ranks and sequence lengths in scientific notation are named", "[cli][validation]") {
  // Found by a fuzzing pass: each was accepted (4.3 billion GPUs fit) or refused with a misleading reason.
  const std::pair<const char*, const char*> cases[] = {
      {"--model llama-3.1-8b --gpus 4294967297 --zero 3", "beyond any real cluster"},
      {"--params 7B --finetune lora --lora-rank 99999", "larger than the hidden size"},
      {"--model gpt2 --seq 1e3", "scientific notation"},
  };
  for (const auto& [args, why] : cases) {
    INFO(args);
    const plan_run r = run_plan(args);
    CHECK(r.exit_code == 2);
    CHECK(one_line(r.err));
    CHECK_THAT(r.err, Catch::Contains(why));
  }
}

TEST_CASE("names users know from other tools: optimizer aliases plan alike, and a bare fp16 names both regimes", "[cli][errors][validation]") {
  // transformers' optim values and bitsandbytes' class name are the same optimizers as plan's own names.
  const plan_run own = run_plan("--model gpt2 --seq 512 --optimizer adamw-8bit --json");
  REQUIRE(own.exit_code == 0);
  const nlohmann::json own_report = nlohmann::json::parse(own.out);
  for (const char* alias : {"adamw8bit", "adamw_8bit", "adamw_bnb_8bit", "AdamW8bit"}) {
    const plan_run p = run_plan(std::string("--model gpt2 --seq 512 --json --optimizer ") + alias);
    INFO(alias << ": " << p.err);
    REQUIRE(p.exit_code == 0);
    CHECK(nlohmann::json::parse(p.out).at("memory").at("optimizer_bytes") == own_report.at("memory").at("optimizer_bytes"));
  }
  // A different optimizer's state gives a different peak: the aliases above are no catch-all.
  const plan_run adamw = run_plan("--model gpt2 --seq 512 --optimizer adamw_torch --json");
  REQUIRE(adamw.exit_code == 0);
  CHECK(nlohmann::json::parse(adamw.out).at("memory").at("optimizer_bytes") != own_report.at("memory").at("optimizer_bytes"));
  // "fp16" alone is Hugging Face's autocast or Megatron's fp16 weights: both named, neither guessed.
  expect_refused("--model gpt2 --precision fp16", {"--precision", "'amp-fp16'", "'fp16-mixed'"});
}
