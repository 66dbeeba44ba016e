// docs/json.md against `plan --json` (cli/plan_report_json.cpp): every field the output writes is documented,
// and every documented field appears in the output of one of the sample plans below.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_plan.hpp"

using namespace trainplan::test;
using json = nlohmann::json;

namespace {

// The dotted paths of docs/json.md's field tables: the first column of each row, one backticked path
// (`memory.allocator.failed_step`, `suggestions[].changes`, `time.breakdown.*`).
std::vector<std::string> documented_fields() {
  std::ifstream in(std::string(TRAINPLAN_SOURCE_DIR) + "/docs/json.md");
  REQUIRE(in.good());
  const std::regex row(R"(^\| `([A-Za-z_][A-Za-z0-9_.*\[\]]*)` \|)");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) out.push_back(m[1]);
  }
  return out;
}

// Every node of the output, as the same kind of path: objects by their keys, an array of objects by "[]" and
// its elements' keys; a scalar, or an array of scalars, ends a path.
void output_fields(const json& j, const std::string& path, std::set<std::string>& out) {
  if (!path.empty()) out.insert(path);
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) output_fields(it.value(), path.empty() ? it.key() : path + "." + it.key(), out);
  } else if (j.is_array()) {
    for (const json& e : j)
      if (e.is_object())
        for (auto it = e.begin(); it != e.end(); ++it) output_fields(it.value(), path + "[]." + it.key(), out);
  }
}

// A documented path as a pattern: `*` is any one key.
std::regex pattern_of(const std::string& documented) {
  std::string re;
  for (const char c : documented) {
    if (c == '*') re += "[^.]+";
    else if (c == '.' || c == '[' || c == ']') re += std::string("\\") + c;
    else re += c;
  }
  return std::regex(re);
}

// The documented path and the objects and arrays above it (`suggestions[].roomiest.added` -> `suggestions`,
// `suggestions[].roomiest`): an output node is documented when it is one of these.
std::vector<std::string> with_parents(const std::string& documented) {
  std::vector<std::string> out{documented};
  for (std::size_t at = documented.find('.'); at != std::string::npos; at = documented.find('.', at + 1)) {
    std::string parent = documented.substr(0, at);
    if (parent.ends_with("[]")) parent.resize(parent.size() - 2);
    out.push_back(parent);
  }
  return out;
}

}  // namespace

TEST_CASE("docs/json.md lists every field plan --json writes, and each one it lists appears", "[cli][json]") {
  const std::vector<std::string> documented = documented_fields();
  REQUIRE(documented.size() > 100);
  // The four plans the brief of the format names (one GPU, FSDP2 on 8, LoRA, Megatron's tensor and pipeline
  // parallelism), and the ones that bring out the fields that appear only sometimes.
  const std::vector<std::string> plans = {
      "--params 7B --seq 4096 --gpu h100",
      "--params 7B --seq 4096 --gpu h100 --gpus 8 --framework fsdp2",
      "--params 7B --seq 4096 --gpu h100 --finetune lora",
      "--params 7B --seq 4096 --gpu h100 --framework megatron --tp 2 --pp 2 --gpus 8",
      // Mixture of Experts with dense layers, a shared expert and latent attention; a capacity factor.
      "--model deepseek-v3 --seq 4096 --gpu h100 --gpus 256 --ep 64 --zero 3 --recompute full --capacity-factor 1.25",
      // Sliding windows and soft caps.
      "--model gemma-2-9b --seq 4096 --gpu h100",
      // Offload to CPU memory with a limit; the time to train.
      "--params 7B --seq 4096 --gpu h100 --gpus 8 --zero 3 --offload optimizer --host-memory 1T --tokens 1B",
      // Learned positions; the allocator replay out of memory (test_cli_sweep.cpp's case).
      "--model gpt2 --seq 1024 --micro-batch 48 --gpu h100",
      // On an allocator edge (test_cli_allocator.cpp's S5): what another run in the process leaves.
      "--model gpt2 --seq 1024 --micro-batch 4 --precision amp-bf16 --dropout 0.1 --recompute full --gpu h100",
      // Too many buffers to replay: the estimate stands.
      "--model gpt2 --layers 30000 --seq 1024 --gpu h100 --suggestions 0",
      // Several GPUs whose communication is not modelled (a box without a network).
      "--model gpt2 --seq 1024 --gpu rtx-4090 --gpus 16 --zero 3",
      // A loss that never builds the whole logits; packed documents.
      "--model llama-3.2-3b --seq 2048 --gpu h100 --loss chunked --loss-chunks 4 --packing 512",
      // torch.compile.
      "--model llama-3.2-3b --seq 2048 --gpu h100 --precision bf16 --compile",
  };
  std::set<std::string> seen;
  for (const std::string& args : plans) {
    INFO("plan " << args << " --json");
    const plan_run r = run_plan(args + " --json");
    REQUIRE((r.exit_code == 0 || r.exit_code == 1));
    const json j = json::parse(r.out);
    CHECK(j["schema_version"] == 1);
    std::set<std::string> fields;
    output_fields(j, "", fields);
    for (const std::string& field : fields) {
      bool listed = false;
      for (const std::string& d : documented)
        for (const std::string& p : with_parents(d))
          if (std::regex_match(field, pattern_of(p))) listed = true;
      INFO("output field " << field);
      CHECK(listed);
    }
    seen.insert(fields.begin(), fields.end());
  }
  for (const std::string& d : documented) {
    const std::regex p = pattern_of(d);
    bool appears = false;
    for (const std::string& field : seen)
      if (std::regex_match(field, p)) appears = true;
    INFO("documented field " << d);
    CHECK(appears);
  }
}

TEST_CASE("plan --json leaves out what does not apply, not zero", "[cli][json]") {
  const json full = json::parse(run_plan("--params 7B --seq 4096 --gpu h100 --json").out);
  CHECK_FALSE(full["run"].contains("lora_rank"));   // a full fine-tune has no adapters
  CHECK_FALSE(full["model"].contains("max_positions"));  // rotary positions, no table
  CHECK_FALSE(full["model"].contains("experts"));
  CHECK_FALSE(full["memory"]["overhead"].contains("nccl_bytes"));  // one GPU
  CHECK_FALSE(full["time"].contains("communication"));
  CHECK_FALSE(full.contains("host"));
  const json lora = json::parse(run_plan("--params 7B --seq 4096 --gpu h100 --finetune lora --json").out);
  CHECK(lora["run"]["lora_rank"] == 16);
  const json gpt2 = json::parse(run_plan("--model gpt2 --seq 1024 --gpu h100 --json").out);
  CHECK(gpt2["model"]["max_positions"] == 1024);
  // Megatron's estimate replays no allocator: no replay fields at all.
  const json megatron = json::parse(run_plan("--model gpt2 --seq 1024 --micro-batch 4 --framework megatron --json").out);
  CHECK_FALSE(megatron["memory"].contains("allocator"));
  CHECK_FALSE(megatron["memory"].contains("allocator_reserved_bytes"));
  // Each suggestion carries the command that runs it, which prints that suggestion's peak.
  REQUIRE_FALSE(full["suggestions"].empty());
  const json& first = full["suggestions"][0];
  const std::string command = first["command"];
  REQUIRE(command.starts_with("plan --params 7B --seq 4096 --gpu h100"));
  const json again = json::parse(run_plan(command.substr(5) + " --json").out);
  CHECK(again["memory"]["peak_bytes"] == first["peak_bytes"]);
}
