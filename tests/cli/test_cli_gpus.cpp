// `plan gpus`: where each GPU's memory, CUDA context and time constants come from, and the report's line when a GPU's
// time constants are another GPU's, run as a user runs them.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "run_plan.hpp"

using namespace trainplan::test;
using json = nlohmann::json;

namespace {

json data_file(const char* name) { return json::parse(slurp(std::string(TRAINPLAN_SOURCE_DIR) + "/data/" + name)); }

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out(1);
  for (const char c : text) {
    if (c == sep) out.emplace_back();
    else out.back() += c;
  }
  return out;
}

}  // namespace

TEST_CASE("plan gpus says where each GPU's memory, CUDA context and time constants come from", "[cli]") {
  const plan_run r = run_plan("gpus");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> lines = lines_of(r.out);
  const auto header = std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return l.starts_with("name        cc "); });
  REQUIRE(header != lines.end());
  // "name cc memory matmul CUDA context hf/llmc/... time constants hf/llmc/..."
  const std::vector<std::string> head = words(*header);
  REQUIRE(head.size() == 10);
  CHECK(head[3] == "matmul");
  CHECK(head[4] + " " + head[5] == "CUDA context");
  const std::vector<std::string> stacks = split(head[6], '/');
  CHECK(head[9] == head[6]);
  CHECK(std::find(stacks.begin(), stacks.end(), "hf") != stacks.end());

  // The rule, from data/gpus.json and data/calibration.json read directly: a stack's figure is the GPU's own entry's
  // (measured), else the reference GPU's (its time constants on any GPU, its context on the same compute capability),
  // else the default entry's.
  const json gpus = data_file("gpus.json")["gpus"];
  const json cal = data_file("calibration.json");
  const std::string reference = cal["reference_gpu"];
  std::string reference_cc;
  for (const json& g : gpus)
    if (g["name"] == reference) reference_cc = g["compute_capability"];
  REQUIRE_FALSE(reference_cc.empty());
  auto own = [&](const std::string& gpu, const std::string& stack, const char* key) {
    return cal["gpus"].contains(gpu) && cal["gpus"][gpu].contains("profiles") && cal["gpus"][gpu]["profiles"].contains(stack) &&
           cal["gpus"][gpu]["profiles"][stack].contains(key);
  };
  for (const json& g : gpus) {
    const std::string name = g["name"];
    INFO(name);
    const auto row = std::find_if(header, lines.end(), [&](const std::string& l) { return !words(l).empty() && words(l)[0] == name; });
    REQUIRE(row != lines.end());
    const std::vector<std::string> cells = words(*row);
    REQUIRE(cells.size() == 6);
    CHECK(cells[1] == g["compute_capability"]);
    CHECK(cells[2] == g["memory_source"]);
    CHECK(cells[3] == (g.contains("matmul_achievable_fraction")
                           ? fmt::format("{:.1f}%", 100 * g["matmul_achievable_fraction"].get<double>())
                           : std::string("-")));
    const std::vector<std::string> context = split(cells[4], '/'), time = split(cells[5], '/');
    REQUIRE(context.size() == stacks.size());
    REQUIRE(time.size() == stacks.size());
    for (std::size_t i = 0; i < stacks.size(); ++i) {
      INFO(stacks[i]);
      const bool same_cc = g["compute_capability"] == reference_cc;
      CHECK(context[i] == (own(name, stacks[i], "cuda_context_bytes")                        ? "measured"
                           : same_cc && own(reference, stacks[i], "cuda_context_bytes") ? reference + "'s"
                                                                                         : "default"));
      CHECK(time[i] == (own(name, stacks[i], "timing")        ? "measured"
                        : own(reference, stacks[i], "timing") ? reference + "'s"
                                                              : "default"));
    }
  }
  // The committed data: the H100 is the reference, measured under hf; an A100 takes its time constants, not its context.
  CHECK(reference == "h100");
  CHECK_THAT(r.out, Catch::Contains("memory: measured: cudaMemGetInfo's total"));
}

TEST_CASE("the report says in one line when the GPU's time constants are another GPU's", "[cli]") {
  const std::string line = "time constants: the h100's by the datasheets' peak ratios, not measured on the a100-80gb";
  const plan_run a100 = run_plan("--model gpt2 --seq 1024 --micro-batch 4 --gpu a100-80gb");
  INFO(a100.err);
  REQUIRE(a100.exit_code == 0);
  CHECK_THAT(a100.out, Catch::Contains(line));
  const plan_run explained = run_plan("--model gpt2 --seq 1024 --micro-batch 4 --gpu a100-80gb --explain");
  CHECK_THAT(explained.out, Catch::Contains(line));
  const plan_run as_json = run_plan("--model gpt2 --seq 1024 --micro-batch 4 --gpu a100-80gb --json");
  const json assumptions = json::parse(as_json.out)["assumptions"];
  // The A100 reaches more of its datasheet than the H100 (data/gpus.json: 86.9% against 80.3%): its GEMMs
  // are scaled by the ratio, and the line says so.
  const std::string gemms = fmt::format("; GEMMs x {:.3f}, the a100-80gb's achievable share", 0.869 / 0.803);
  CHECK(std::any_of(assumptions.begin(), assumptions.end(), [&](const json& a) {
    return a.get<std::string>().starts_with(line + gemms);
  }));
  // Measured on the H100 itself: no line. Megatron's constants are the default entry's on every GPU, seen on
  // H100 runs: on the A100 only its GEMMs move; on a GPU whose achievable share is not published, no line.
  CHECK_THAT(run_plan("--model gpt2 --seq 1024 --micro-batch 4 --gpu h100").out, !Catch::Contains("time constants:"));
  const json megatron_a100 =
      json::parse(run_plan("--model gpt2 --seq 1024 --micro-batch 4 --gpu a100-80gb --framework megatron --json").out);
  CHECK(std::any_of(megatron_a100["assumptions"].begin(), megatron_a100["assumptions"].end(), [&](const json& a) {
    return a.get<std::string>().starts_with("time constants: the default entry's" + gemms);
  }));
  CHECK_THAT(run_plan("--model gpt2 --seq 1024 --micro-batch 4 --gpu l40s --framework megatron").out,
             !Catch::Contains("time constants:"));
}

TEST_CASE("the report names the attention kernel the GPU gets, and flash-attn is refused below sm_80", "[cli]") {
  const std::string run = "--model llama-2-7b --seq 1024 --gpu ";
  CHECK_THAT(run_plan(run + "h100 --explain").out, Catch::Contains("attention: cuDNN/FlashAttention"));
  CHECK_THAT(run_plan(run + "a100-80gb --explain").out, Catch::Contains("attention: FlashAttention (PyTorch's own"));
  CHECK_THAT(run_plan(run + "t4 --precision amp-fp16 --explain").out, Catch::Contains("attention: memory-efficient"));
  const plan_run refused = run_plan(run + "t4 --precision amp-fp16 --attention flash_attention_2");
  CHECK(refused.exit_code == 2);
  CHECK(std::count(refused.err.begin(), refused.err.end(), '\n') <= 1);
  CHECK_THAT(refused.err, Catch::Contains("--attention flash_attention_2") && Catch::Contains("7.5"));
}
