// plan calibrate, check, the multi-GPU suggestions and the CUDA commands without a GPU, run as a user runs them.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "expect_refused.hpp"
#include "run_plan.hpp"
#include "planner/io/catalog.hpp"

using namespace trainplan::test;
using json = nlohmann::json;

namespace {

// The lines of a collector report (scripts/collect_hf.py's format): the env line first, then one per run.
std::vector<json> report_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> out;
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  REQUIRE(out.size() >= 2);
  return out;
}

// Whether a table lists every run of the report, each at the start of a row ("  ID   ...").
bool lists_every_run(const std::string& table, const std::vector<json>& lines) {
  for (std::size_t i = 1; i < lines.size(); ++i)
    if (table.find("\n  " + lines[i]["id"].get<std::string>() + " ") == std::string::npos) return false;
  return true;
}

}  // namespace

TEST_CASE("plan calibrate fits GPU reports, writes calibration.json, and the planner reads it back", "[cli][calibrate]") {
  // Stand-ins for CUDA reports: each run "measures" exactly what the planner predicts for the h100 with
  // the built-in calibration, so the fit must give that calibration back with no error, and a report
  // whose device used 10% more memory must move the context estimate.
  const auto dir = trainplan::test::scratch_dir("trainplan-calibrate");
  std::filesystem::create_directories(dir / "reports");
  int k = 0;
  json first;  // what the planner assumes now: the fit must give it back
  for (const char* config : {"--seq 512 --micro-batch 1", "--seq 1024 --micro-batch 4", "--seq 1024 --micro-batch 16"}) {
    json p = json::parse(run_plan(std::string("--model gpt2 --gpu h100 --framework trainplan --json ") + config).out);
    if (first.is_null()) first = p;
    json report = {{"backend", "cuda"},
                   {"gpu", {{"name", "h100"}}},
                   {"model", p["model"]},
                   {"run", p["run"]},
                   {"measured", {{"peak_bytes", p["memory"]["tensor_peak_bytes"]}}},
                   {"device", {{"context_bytes", p["memory"]["overhead"]["cuda_context_bytes"]},
                               {"workspace_bytes", p["memory"]["overhead"]["cublas_workspace_bytes"]},
                               {"device_peak_bytes", p["memory"]["peak_bytes"]},
                               {"step_seconds", p["time"]["step_seconds"]}}}};
    report["model"]["qkv_bias"] = false;
    std::ofstream(dir / "reports" / ("run" + std::to_string(k++) + ".json")) << report.dump();
  }
  const auto out = dir / "data" / "calibration.json";
  std::filesystem::create_directories(out.parent_path());
  plan_run r = run_plan("calibrate " + (dir / "reports").string() + " -o " + out.string());
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("met") && Catch::Contains("Wrote the h100 entry"));
  json written = json::parse(slurp(out));
  const json& overhead = first["memory"]["overhead"];
  const json& harness = written["gpus"]["h100"]["profiles"]["trainplan"];
  CHECK(harness["cuda_context_bytes"] == overhead["cuda_context_bytes"]);
  CHECK(harness["allocator_slack_fraction"].get<double>() ==
        Approx(overhead["allocator_slack_bytes"].get<double>() / first["memory"]["tensor_peak_bytes"].get<double>()).margin(1e-4));
  // The harness's fit is its own: Megatron's context stays the literature value.
  CHECK_FALSE(written["gpus"]["h100"].contains("cuda_context_bytes"));
  CHECK(harness["timing"]["gemm_efficiency"].is_number());
  CHECK(written["gpus"].contains("a100-40gb"));  // the other entries are kept
  // and what a collector's reports fitted in this GPU's entry (it once replaced the whole entry)
  CHECK(written["gpus"]["h100"]["profiles"]["hf"]["cuda_context_bytes"] == 648871936ull);
  CHECK(written["gpus"]["h100"]["profiles"]["hf"]["timing"]["gemm_efficiency"].is_number());
  CHECK_THAT(written["gpus"]["h100"]["source"].get<std::string>(),
             Catch::StartsWith("plan calibrate on 3 runs") && Catch::Contains("; plan calibrate --framework hf on"));
  // Calibrating again replaces the fit's own part of the source, whole: the file comes out the same.
  REQUIRE(run_plan("calibrate " + (dir / "reports").string() + " -o " + out.string()).exit_code == 0);
  CHECK(json::parse(slurp(out)) == written);
  // The planner loads the new file through --data-dir.
  CHECK(run_plan("--model gpt2 --seq 512 --data-dir " + out.parent_path().string()).exit_code == 0);
  // Reports named one by one are named by their folder, with how many of its reports the fit took.
  const std::string two = (dir / "reports" / "run0.json").string() + " " + (dir / "reports" / "run2.json").string();
  REQUIRE(run_plan("calibrate " + two + " -o " + out.string()).exit_code == 0);
  CHECK_THAT(json::parse(slurp(out))["gpus"]["h100"]["source"].get<std::string>(),
             Catch::StartsWith("plan calibrate on 2 runs of " + (dir / "reports").string() + "/ (2 of its 3 reports)"));

  json bad = json::parse(run_plan("validate --layers 2 --hidden 32 --heads 4 --vocab 64 --seq 16 --json --no-report").out);
  std::ofstream(dir / "cpu.json") << bad.dump();
  plan_run cpu = run_plan("calibrate " + (dir / "cpu.json").string());
  CHECK(cpu.exit_code == 2);
  CHECK(one_line(cpu.err));
  CHECK(run_plan("calibrate /nonexistent/folder").exit_code == 2);
  std::filesystem::remove_all(dir);
}

TEST_CASE("beyond one GPU: the main command lists multi-GPU, offload and LoRA ways to fit, JSON per GPU", "[cli][parallel]") {
  plan_run r = run_plan("--params 7B --seq 4096 --gpu h100");
  CHECK_THAT(r.out, Catch::Contains("--zero 3") && Catch::Contains("--offload optimizer"));
  // LoRA under hf loads the base in bf16: for 7B pure bf16 alone fits (so LoRA is no smaller answer); 13B
  // needs the adapters as well. Adapters are offered to a fine-tuning run (--finetune given), never to pretraining.
  // The suggestion's --finetune lora takes the place of the --finetune full given.
  CHECK_THAT(run_plan("--params 13B --seq 4096 --gpu h100 --finetune full").out,
             Catch::Contains("plan --params 13B --seq 4096 --gpu h100 --finetune lora --precision bf16\n"));
  CHECK_THAT(run_plan("--params 13B --seq 4096 --gpu h100").out, !Catch::Contains("--finetune"));
  json j = json::parse(run_plan("--params 7B --seq 4096 --gpu h100 --gpus 8 --zero 3 --offload optimizer --json").out);
  CHECK(j["fits"] == true);
  CHECK(j["run"]["gpus"] == 8);
  CHECK(j["run"]["zero"] == 3);
  CHECK(j["host"]["memory_bytes"].get<std::uint64_t>() == 12ull * ((6738415616ull + 7) / 8));
  CHECK(j["model"]["trainable_params"] == 6738415616ull);
  CHECK(j["run"]["tokens_per_step"] == 8 * 4096);
  json lora = json::parse(run_plan("--params 7B --seq 1024 --gpu a10g --finetune lora --lora-rank 16 --lora-targets q,k,v,o "
                                   "--recompute full --micro-batch 4 --grad-accum 8 --json").out);
  CHECK(lora["fits"] == true);
  CHECK(lora["model"]["trainable_params"] == 16777216ull);
  CHECK(run_plan("--params 7B --seq 4096 --gpu h100 --fsdp full --gpus 4").exit_code == 0);
  // The global batch spans the data-parallel GPUs: 64 sequences = micro-batch 2 x 4 GPUs x 8 steps.
  json global = json::parse(run_plan("--params 7B --seq 4096 --gpu h100 --gpus 4 --zero 3 --micro-batch 2 --global-batch 64 --json").out);
  CHECK(global["run"]["grad_accum"] == 8);
  CHECK(global["run"]["global_batch"] == 64);
  CHECK(run_plan("--params 7B --seq 4096 --gpu h100 --gpus 2 --zero 3 --offload both --host-memory 1G").exit_code == 1);
  for (const char* bad : {"--model gpt2 --gpus 3 --tp 2", "--model gpt2 --zero 4", "--model gpt2 --fsdp half",
                          "--model gpt2 --fsdp full --zero 1", "--model gpt2 --offload params", "--model gpt2 --offload disk",
                          "--model gpt2 --pp 5 --gpus 5", "--model llama-2-7b --tp 3 --gpus 3", "--model gpt2 --finetune lora --lora-rank 0",
                          "--model gpt2 --lora-targets q,x", "--model gpt2 --host-memory lots", "--model gpt2 --gpus 0",
                          "--model gpt2 --finetune lora --lora-dtype int8", "--model gpt2 --finetune lora --lora-dropout 1",
                          "--model gpt2 --finetune lora --lora-dropout -0.1", "--model gpt2 --finetune lora --lora-dropout nan"}) {
    expect_refused(bad);
  }
}

TEST_CASE("without a usable GPU the CUDA commands say why and exit 2", "[cli][gpu]") {
  // On a machine with a GPU these would run; here (CI, developers) they must refuse clearly.
  for (const char* args : {"validate --layers 2 --hidden 32 --heads 4 --vocab 64 --seq 16 --backend cuda --no-report",
                           "validate --suite gpu", "bench --backend cuda", "bench --backend cuda --kernels"}) {
    INFO(args);
    plan_run r = run_plan(args);
    if (r.exit_code == 2) {
      CHECK(one_line(r.err));
      CHECK_THAT(r.err, Catch::Contains("cuda") || Catch::Contains("CUDA") || Catch::Contains("GPU"));
    } else {
      WARN("a GPU is present here: " << args << " ran with exit code " << r.exit_code);
    }
  }
}

TEST_CASE("plan check predicts a collector report's runs beside the measurements", "[cli][check]") {
  const std::string shared = fixture("measurements/pytorch-hf-h100-2026-11-22.jsonl");
  // Each run as if in a process of its own: the checkpointed GPT-2 reserves one loss segment more than it did
  // after the first run in the shared file's one process (+14%), so not all are within 5%.
  plan_run r = run_plan("check " + shared);
  CHECK(r.exit_code == 1);
  CHECK(lists_every_run(r.out, report_lines(shared)));
  CHECK_THAT(r.out, Catch::Contains("torch 2.11.0"));
  // That run sits on an edge: check says what it reserves after another run in the same process, beside the
  // measurement.
  CHECK_THAT(r.out, Catch::Contains("after another run in the same process the replay reserves 4.65 GiB: device peak "
                                    "5.25 GiB (+0.04%)"));
  // As it was measured, one run after another in one process: every run within the tolerances, exit 0.
  plan_run one = run_plan("check " + shared + " --one-process");
  CHECK(one.exit_code == 0);
  CHECK_THAT(one.out, Catch::Contains("one after another in one process") && Catch::Contains("all within"));
  // Each tolerance decides the exit code on its own: with the memory ones met, every step time is within
  // the default 20% (tests/planner/time/test_step_time.cpp checks the figures), exit 0; at 10% on time, not all.
  CHECK(run_plan("check " + shared + " --device-tolerance 20").exit_code == 0);
  CHECK(run_plan("check " + shared + " --one-process --time-tolerance 10").exit_code == 1);
  // Step times quoted without memory figures: only the step time is compared, the memory columns are "-".
  const std::string times = fixture("measurements/pytorch-hf-h100-2026-11-22-step-times.jsonl");
  plan_run t = run_plan("check " + times);
  CHECK(t.exit_code == 0);
  CHECK_THAT(t.out, Catch::Contains("R1") && Catch::Contains("R2") && Catch::Contains(" - "));
  CHECK(run_plan("check " + times + " --time-tolerance 0.5").exit_code == 1);
  // Bad reports: one line, exit 2.
  const auto dir = trainplan::test::scratch_dir("trainplan-check");
  const std::pair<const char*, const char*> bad[] = {
      {"empty.jsonl", ""},
      {"noenv.jsonl", "{\"id\": \"X1\"}\n"},
      {"broken.jsonl", "{\"id\": \"env\", \"gpu\": \"x\", \"torch\": \"t\", \"transformers\": \"t\", \"context_bytes\": 1, \"gpu_total_bytes\": 2}\n{not json\n"},
      {"field.jsonl", "{\"id\": \"env\", \"gpu\": \"x\", \"torch\": \"t\", \"transformers\": \"t\", \"context_bytes\": 1, \"gpu_total_bytes\": 2}\n"
                      "{\"id\": \"X1\", \"model\": {\"fam\": \"gpt2\", \"L\": 2, \"h\": 64, \"a\": 4, \"V\": 100}, \"seq\": -5}\n"}};
  for (const auto& [name, content] : bad) {
    INFO(name);
    std::ofstream(dir / name) << content;
    plan_run e = run_plan("check " + (dir / name).string());
    CHECK(e.exit_code == 2);
    CHECK(one_line(e.err));
  }
  CHECK(run_plan("check " + dir.string()).exit_code == 2);  // a folder
  std::filesystem::remove_all(dir);
}

TEST_CASE("plan check compares a measurement with what the allocator keeps in the GPU, not the least memory a run needs", "[cli][check][hf]") {
  // Llama-3.1-8B's shape in bf16 at s1024 b1 on an H100: its allocator runs short and frees its cache. The
  // plan's peak is the least memory the run completes in; a measurement reads max_memory_reserved(), the
  // cache it kept in the GPU's memory. A report that measured exactly that must agree to the byte.
  const std::string shape = "--family llama --layers 32 --hidden 4096 --heads 32 --kv-heads 8 --ffn 14336 --vocab 128256 "
                            "--seq 1024 --micro-batch 1 --precision bf16 --gpu h100";
  const plan_run p = run_plan(shape + " --json");
  REQUIRE(p.exit_code == 0);
  const nlohmann::json report = nlohmann::json::parse(p.out);
  const nlohmann::json& memory = report.at("memory");
  const nlohmann::json& allocator = memory.at("allocator");
  REQUIRE(allocator.at("cache_releases").get<std::uint64_t>() >= 1);
  const std::uint64_t workspace = memory.at("overhead").at("cublas_workspace_bytes").get<std::uint64_t>();
  const std::uint64_t kept = allocator.at("budget_reserved_bytes").get<std::uint64_t>() + workspace;
  REQUIRE(kept > memory.at("allocator_reserved_bytes").get<std::uint64_t>());  // the cache above the least
  const std::uint64_t tensors = memory.at("tensor_peak_bytes").get<std::uint64_t>() + workspace;
  const auto dir = trainplan::test::scratch_dir("trainplan-check-kept");
  std::ofstream(dir / "run.jsonl")
      << R"({"id": "env", "torch": "2.11.0", "transformers": "5.17.0", "gpu": "NVIDIA H100 80GB HBM3", "gpu_total_bytes": 85017493504, "context_bytes": 648871936})"
      << "\n"
      << R"({"id": "K1", "seq": 1024, "mbs": 1, "regime": "bf16", "attn": "sdpa", "gc": false, "drop": 0.0, "step_s": 1.0, "params": )"
      << report.at("model").at("params").get<std::uint64_t>() << R"(, "alloc_peak": )"
      << tensors << R"(, "reserved_peak": )" << kept
      << R"(, "model": {"fam": "llama", "L": 32, "h": 4096, "a": 32, "kv": 8, "ffn": 14336, "V": 128256, "tied": false}})" << "\n";
  // Within 0.01% on the tensors and the device: the least memory would be 3% below the measurement.
  const plan_run c = run_plan("check " + (dir / "run.jsonl").string() +
                              " --tensor-tolerance 0.01 --device-tolerance 0.01 --time-tolerance 1000");
  INFO(c.out << c.err);
  CHECK(c.exit_code == 0);
}

TEST_CASE("plan check sets a run's segments beside the replay's, size by size", "[cli][check][hf][segments]") {
  // A GPT-2 line of the shared file with segments added (collect_hf.py writes them): one of 6000 MiB, which the
  // replay never makes, and one of the small pool. Check names the sizes that differ and the buffers whose
  // allocation made the replay's extra ones. (The "measurement" is made up, so the line must be one whose tensor
  // peak lies below the 6000 MiB segment: a reserved peak below the tensor peak is refused.) Its replay follows
  // GPT-2's forward op by op, cuBLAS workspaces included, and fits the H100 without freeing its cache.
  const std::vector<json> shared = report_lines(fixture("measurements/pytorch-hf-h100-2026-11-22.jsonl"));
  const std::string env = shared[0].dump();
  json run, coarse;
  for (std::size_t i = 1; i < shared.size() && !run.is_object(); ++i)
    if (shared[i]["model"]["fam"] == "gpt2" && shared[i]["alloc_peak"].get<std::uint64_t>() < (6000ull << 20)) run = shared[i];
  // A Mistral line at a sequence at least as long as its sliding window (MistralConfig's 4096 where the line
  // names none; null: no window): transformers builds a mask there, and the forward stays coarse.
  auto window = [](const json& model) -> std::uint64_t {
    if (!model.contains("sliding_window")) return 4096;
    return model["sliding_window"].is_null() ? 0 : model["sliding_window"].get<std::uint64_t>();
  };
  for (const json& j : report_lines(std::string(TRAINPLAN_MEASUREMENTS) + "/pytorch-hf-h100-2026-11-27-extra.jsonl"))
    if (!coarse.is_object() && j["id"] != "env" && j["model"]["fam"] == "mistral" && window(j["model"]) > 0 &&
        j["seq"].get<std::uint64_t>() >= window(j["model"]))
      coarse = j;
  REQUIRE(run.is_object());
  REQUIRE(coarse.is_object());
  const auto dir = trainplan::test::scratch_dir("trainplan-check-segments");
  run["segments"] = json::array({json::array({"large", 6000ull << 20}), json::array({"small", 2ull << 20})});
  run["allocator_counts"] = {{"num_device_alloc", 2}, {"num_device_free", 0}, {"num_alloc_retries", 0}};
  run["reserved_peak"] = (6000ull << 20) + (2ull << 20);  // so that they sum to the reserved peak
  json expandable = run;
  expandable["id"] = run["id"].get<std::string>() + "e";
  expandable["expandable_segments"] = true;
  coarse["segments"] = json::array({json::array({"large", 16000ull << 20}), json::array({"small", 2ull << 20})});
  coarse["allocator_counts"] = run["allocator_counts"];
  coarse["reserved_peak"] = (16000ull << 20) + (2ull << 20);
  std::ofstream(dir / "run.jsonl") << env << "\n" << run.dump() << "\n" << expandable.dump() << "\n" << coarse.dump() << "\n";
  const plan_run c = run_plan("check " + (dir / "run.jsonl").string());
  INFO(c.out << c.err);
  CHECK_THAT(c.out, Catch::Contains("segments: measured 2 (5.86 GiB), replayed "));
  CHECK_THAT(c.out, Catch::Contains("large 6000 MiB: measured 1, replayed 0 (-5.86 GiB)"));
  // PyTorch's two cuBLAS workspaces are in the measured segments; a replay that follows the forward op by op
  // makes them too (GPT-2's), a coarse one leaves them out (Mistral's), which check says, with their size, once.
  const std::string left_out = "the replay leaves out PyTorch's cuBLAS workspaces, 64 MiB in all";
  CHECK_THAT(c.out, Catch::Contains(left_out));
  CHECK(c.out.find(left_out) == c.out.rfind(left_out));
  // The replay's largest segment (the loss's [b*s, V] fp32) is one the "measurement" lacks: named with
  // the buffer and step (1-based) that made it.
  CHECK_THAT(c.out, Catch::Contains("large 786 MiB: measured 0, replayed ") && Catch::Contains("the replay's last made by step 1 loss."));
  CHECK_THAT(c.out, Catch::Contains("segments: not compared (with expandable segments"));
  // The allocator's counters beside the replay's (the GPT-2 run fits the H100 without freeing its cache).
  CHECK_THAT(c.out, Catch::Contains("allocator: 2 cudaMalloc, 0 cudaFree, 0 retries after freeing its cache; the replay: ") &&
                        Catch::Contains(" segments made, 0 releases of its cache") &&
                        Catch::Contains(" segments made (address ranges), 0 releases of its cache"));
  // Segments that do not sum to the reserved peak: the run gave some back, and check says so.
  run["reserved_peak"] = 6100ull << 20;
  std::ofstream(dir / "gave.jsonl") << env << "\n" << run.dump() << "\n";
  CHECK_THAT(run_plan("check " + (dir / "gave.jsonl").string()).out,
             Catch::Contains("the measured ones sum to 98 MiB below the reserved peak: the run gave some back"));
  // More than the reserved peak: no run holds that; said so.
  run["reserved_peak"] = (6000ull << 20);
  std::ofstream(dir / "more.jsonl") << env << "\n" << run.dump() << "\n";
  CHECK_THAT(run_plan("check " + (dir / "more.jsonl").string()).out,
             Catch::Contains("the measured ones sum to 2 MiB above the reserved peak, which no run holds"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("plan calibrate --framework hf takes PyTorch's CUDA context from collector reports", "[cli][calibrate][hf]") {
  const auto dir = trainplan::test::scratch_dir("trainplan-calibrate-hf");
  std::filesystem::create_directories(dir / "data");
  // The shared report with its measured context changed to 1 GiB: the planner must read it back.
  std::ifstream in(fixture("measurements/pytorch-hf-h100-2026-11-22.jsonl"));
  std::ofstream out(dir / "report.jsonl");
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line);
    if (j["id"] == "env") j["context_bytes"] = 1073741824ull;
    out << j.dump() << "\n";
  }
  out.close();
  const auto cal = dir / "data" / "calibration.json";
  plan_run r = run_plan("calibrate --framework hf " + (dir / "report.jsonl").string() + " -o " + cal.string());
  CHECK(r.exit_code == 1);  // the three known allocator gaps (see plan check)
  CHECK_THAT(r.out, Catch::Contains("1.00 GiB"));
  CHECK(lists_every_run(r.out, report_lines((dir / "report.jsonl").string())));
  json p = json::parse(run_plan("--model gpt2 --seq 512 --json --data-dir " + (dir / "data").string()).out);
  CHECK(p["memory"]["overhead"]["cuda_context_bytes"] == 1073741824ull);
  CHECK(run_plan("calibrate --framework megatron " + (dir / "report.jsonl").string()).exit_code == 2);
  std::filesystem::remove_all(dir);
}

// Issue 10: --framework trainplan predicts the harness's own step time on the GPU suite within 15%. The h100
// entry of data/calibration.json is plan calibrate's fit on the third session's suite and bench
// (reports/h100-2026-11-27/: 21 validation runs, and bench.json's 4 GPT-2 and GPT-2 XL step times): the fit
// refitted here gives the committed constants back, and every run within 15% of its measured step time
// (9.6% at most when written).
TEST_CASE("the committed harness calibration is the H100 suite's fit, every step time within 15%", "[cli][calibrate]") {
  const std::string dir = std::string(TRAINPLAN_REPORTS) + "/h100-2026-11-27/";
  plan_run fit = run_plan("calibrate --json " + dir + "suite " + dir + "bench.json");
  REQUIRE(fit.exit_code <= 1);  // 1: outside calibrate's own 10% time target
  const json out = json::parse(fit.out);
  REQUIRE(out["residuals"].size() == 25);
  int time_only = 0;
  for (const json& r : out["residuals"]) time_only += r.contains("memory_error_pct") ? 0 : 1;
  CHECK(time_only == 4);  // the bench's runs: step times alone
  CHECK(out["max_memory_error_pct"].get<double>() <= 2.0);
  CHECK(out["max_time_error_pct"].get<double>() <= 15.0);
  std::ifstream committed_file(std::string(TRAINPLAN_MEASUREMENTS) + "/../calibration.json");
  REQUIRE(committed_file);
  const json committed = json::parse(committed_file)["gpus"]["h100"]["profiles"]["trainplan"];
  const json& fitted = out["calibration"]["profiles"]["trainplan"];
  CHECK(fitted["timing"] == committed["timing"]);
  CHECK(fitted["cuda_context_bytes"] == committed["cuda_context_bytes"]);
  CHECK(fitted["allocator_slack_fraction"] == committed["allocator_slack_fraction"]);
}

// bench.json's runs are step times alone; a per-kernel benchmark is skipped, a bench run out of memory too, and a
// bench run without its step time is a malformed report. Bench reports alone give no context to fit.
TEST_CASE("plan calibrate takes bench.json's step times and skips kernels.json", "[cli][calibrate]") {
  const auto dir = trainplan::test::scratch_dir("trainplan-calibrate-bench");
  const std::string reports = std::string(TRAINPLAN_REPORTS) + "/h100-2026-11-27/";
  std::filesystem::create_directories(dir / "mixed");
  for (const char* f : {"suite/gpt2-none-flash.json", "suite/tinyllama-seq-4096.json", "bench.json", "kernels.json"})
    std::filesystem::copy_file(reports + f, dir / "mixed" / std::filesystem::path(f).filename());
  plan_run r = run_plan("calibrate --json " + (dir / "mixed").string());
  REQUIRE(r.exit_code <= 1);
  const json out = json::parse(r.out);
  CHECK(out["residuals"].size() == 6);  // 2 validation runs and the bench's 4; kernels.json skipped
  CHECK_THAT(r.err, Catch::Contains("kernels.json: a per-kernel benchmark"));
  json bench = json::parse(std::ifstream(reports + "bench.json"));
  bench["runs"][1] = {{"model", "gpt2"}, {"seq", 2048}, {"micro_batch", 8}, {"out_of_memory", "logits"}};
  std::ofstream(dir / "mixed" / "bench.json") << bench.dump();
  r = run_plan("calibrate --json " + (dir / "mixed").string());
  REQUIRE(r.exit_code <= 1);
  CHECK(json::parse(r.out)["residuals"].size() == 5);
  bench["runs"][0].erase("step_seconds");
  std::ofstream(dir / "mixed" / "bench.json") << bench.dump();
  r = run_plan("calibrate " + (dir / "mixed").string());
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("bench.json: missing run.step_seconds"));
  CHECK(run_plan("calibrate " + reports + "bench.json").exit_code == 2);  // no run with memory figures
  std::filesystem::remove_all(dir);
}

// --device-only: another host's profiled runs join the hf fit through their GPU busy times alone (the device
// constants), not their step times; the source in calibration.json says so.
TEST_CASE("plan calibrate --framework hf --device-only fits busy times without their step times", "[cli][calibrate][hf]") {
  const auto dir = trainplan::test::scratch_dir("trainplan-calibrate-device-only");
  const std::string m = std::string(TRAINPLAN_MEASUREMENTS) + "/", t = std::string(TRAINPLAN_TEST_DATA) + "/measurements/";
  const std::string cal = (dir / "calibration.json").string();
  plan_run r = run_plan("calibrate --framework hf --gpu h100 " + t + "pytorch-hf-h100-2026-11-22-step-times.jsonl --device-only " + m +
                        "pytorch-hf-h100-2026-11-26-extra-2.jsonl -o " + cal);
  REQUIRE(r.exit_code <= 1);
  CHECK_THAT(r.out, Catch::Contains("over 2 runs") && Catch::Contains("busy times of 8 profiled runs of --device-only"));
  const json written = json::parse(std::ifstream(cal))["gpus"]["h100"];
  CHECK_THAT(written["source"].get<std::string>(),
             Catch::Contains("pytorch-hf-h100-2026-11-22-step-times.jsonl (2 runs), and the GPU busy times of "
                             "pytorch-hf-h100-2026-11-26-extra-2.jsonl (8 runs)"));
  // A report without a profiled run has no busy time to give; the harness's calibration takes none.
  CHECK(run_plan("calibrate --framework hf " + t + "pytorch-hf-h100-2026-11-22-step-times.jsonl --device-only " + t +
                 "pytorch-hf-h100-2026-11-22.jsonl").exit_code == 2);
  CHECK(run_plan("calibrate " + std::string(TRAINPLAN_REPORTS) + "/h100-2026-11-27/suite --device-only " + m +
                 "pytorch-hf-h100-2026-11-26-extra-2.jsonl").exit_code == 2);
  // The harness's reports name their GPU: a --gpu that differs is refused, not ignored.
  const plan_run other_gpu = run_plan("calibrate --gpu a100-80gb " + std::string(TRAINPLAN_REPORTS) + "/h100-2026-11-27/bench.json " +
                                      std::string(TRAINPLAN_REPORTS) + "/h100-2026-11-27/suite/gpt2-fp32.json");
  CHECK(other_gpu.exit_code == 2);
  CHECK_THAT(other_gpu.err, Catch::Contains("the reports were measured on h100"));
  // --json is the harness's form: with --framework hf it is refused, not ignored.
  const plan_run json_hf = run_plan("calibrate --framework hf --json " + t + "pytorch-hf-h100-2026-11-22-step-times.jsonl");
  CHECK(json_hf.exit_code == 2);
  CHECK_THAT(json_hf.err, Catch::Contains("calibrate --json"));
  std::filesystem::remove_all(dir);
}

// Issue 10's withheld-run check, done on this project's own runs: the hf step-time constants fitted on one
// machine's first 16 runs (E1-E13 and S1, S5, S10 measured again) predict the 8 it measured in a second
// session (E14-E21), which the fit never saw, with a median error of at most 15%. plan check --data-dir reads
// the fitted calibration.json. (5.0% when written, E19 the largest at -17.4%, with the 13 profiled runs' busy
// times in the fit; 7.7% and E18's -31.7% fitted on the step times alone.)
TEST_CASE("hf step times fitted on one session's runs predict the next session's within a 15% median",
          "[cli][calibrate][hf]") {
  const auto dir = trainplan::test::scratch_dir("trainplan-hf-holdout");
  std::filesystem::create_directories(dir / "data");
  const std::string m = std::string(TRAINPLAN_MEASUREMENTS) + "/";
  plan_run fit = run_plan("calibrate --framework hf --gpu h100 " + m + "pytorch-hf-h100-2026-11-26-extra.jsonl " + m +
                          "pytorch-hf-h100-2026-11-26-gaps.jsonl -o " + (dir / "data" / "calibration.json").string());
  REQUIRE(fit.exit_code <= 1);  // 1: some run of the fit is outside a tolerance (step times: the fit prints them)
  plan_run check = run_plan("check --gpu h100 --data-dir " + (dir / "data").string() + " " + m +
                            "pytorch-hf-h100-2026-11-26-extra-2.jsonl");
  REQUIRE(check.exit_code <= 1);
  // Each run's row ends with: step measured, predicted, error, then the configuration.
  std::vector<double> errors;
  std::istringstream rows(check.out);
  for (std::string line; std::getline(rows, line);) {
    if (line.rfind("  E", 0) != 0) continue;
    const std::size_t ms = line.rfind("ms ");
    REQUIRE(ms != std::string::npos);
    errors.push_back(std::abs(std::stod(line.substr(ms + 3))));
  }
  REQUIRE(errors.size() == 8);
  std::sort(errors.begin(), errors.end());
  const double median = (errors[3] + errors[4]) / 2;
  INFO(check.out);
  CHECK(median <= 15.0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("the headline run's suggestions, run as suggested, fit", "[cli][suggest]") {
  const std::string base = "--params 7B --seq 4096 --gpu h100";
  plan_run r = run_plan(base + " --json");
  REQUIRE(r.exit_code == 1);
  const json j = json::parse(r.out);
  REQUIRE(j["suggestions"].size() >= 5);
  // Each run as the command it prints (the command line given with its changes merged in).
  for (const json& s : j["suggestions"]) {
    const std::string command = s["command"];
    INFO(command);
    REQUIRE(command.starts_with("plan " + base));
    CHECK(run_plan(command.substr(5)).exit_code == 0);
    CHECK(s["cost"].is_string());
  }
  CHECK(j["suggestions"][0]["cost"] == "slower");  // offload keeps the numerics and the GPU
  // Each roomiest form (the suggestion plus same-numerics levers), run as printed, fits too.
  for (const json& s : j["suggestions"]) {
    if (!s.contains("roomiest")) continue;
    std::string flags;
    for (const json& c : s["changes"]) flags += " " + c.get<std::string>();
    for (const json& c : s["roomiest"]["added"]) flags += " " + c.get<std::string>();
    INFO(flags);
    json again = json::parse(run_plan(base + flags + " --json").out);
    CHECK(again["memory"]["peak_bytes"] == s["roomiest"]["peak_bytes"]);
    CHECK(again["fits"] == true);
  }
  plan_run kept = run_plan(base + " --keep precision,optimizer,gpus,adapters");
  CHECK_THAT(kept.out, !Catch::Contains("--precision") && !Catch::Contains("--optimizer") && !Catch::Contains("--gpus 4"));
  CHECK(run_plan(base + " --keep speed").exit_code == 2);
}

TEST_CASE("DeepSeek-V3 from its preset and from its config: the same plan, latent attention named", "[cli][deepseek]") {
  const std::string run = " --seq 4096 --gpu h100 --gpus 256 --ep 64 --zero 3 --recompute full --json";
  plan_run preset = run_plan("--model deepseek-v3" + run);
  REQUIRE(preset.exit_code == 0);  // fits: 1/256 of the model state per GPU, 4 of 256 experts per layer
  const json p = json::parse(preset.out);
  CHECK(p["model"]["params"] == 671026404352ull);
  CHECK(p["model"]["active_params"] == 37552282624ull);
  CHECK(p["model"]["kv_lora_rank"] == 512);
  CHECK(p["model"]["dense_layers"] == 3);
  CHECK(p["run"]["framework"] == "megatron");  // --ep names it
  plan_run config = run_plan("--hf-config " + fixture("hf/deepseek-v3.json") + run);
  REQUIRE(config.exit_code == 0);
  CHECK(json::parse(config.out)["memory"] == p["memory"]);
  plan_run text = run_plan("--model deepseek-v3 --seq 4096 --gpu h100 --gpus 256 --ep 64 --zero 3 --recompute full");
  CHECK_THAT(flowed(text.out), Catch::Contains("latent attention (kv rank 512, q rank 1536, RoPE dim 64, v dim 128)") &&
                           Catch::Contains("3 dense first layers of width 18432") &&
                           Catch::Contains("an MoE layer keeps"));
  // The harness cannot run latent attention: validate says so and exits 2.
  plan_run harness = run_plan("validate --model deepseek-v3 --seq 64 --backend cpu");
  CHECK(harness.exit_code == 2);
  CHECK_THAT(harness.err, Catch::Contains("latent attention"));
}

TEST_CASE("plan calibrate --cluster-from writes a clusters.json that --data-dir reads back", "[cli][calibrate]") {
  const auto dir = trainplan::test::scratch_dir("trainplan-cluster-fit");
  const std::string report = std::string(TRAINPLAN_TEST_DATA) + "/cluster-fit/ddp-2x8-h100.jsonl";
  const auto out = dir / "clusters.json";
  plan_run r = run_plan("calibrate --cluster-from " + report + " --cluster dgx-h100 -o " + out.string());
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("5 measured collectives") && Catch::Contains("2 left out") &&
                        Catch::Contains("all_reduce     inter_node") && Catch::Contains("Wrote cluster dgx-h100"));
  const json written = json::parse(slurp(out));
  REQUIRE(written["clusters"].size() == 1);
  const json& fitted = written["clusters"][0]["fitted_efficiency"];
  REQUIRE(fitted.size() == 2);
  CHECK(fitted[0]["collective"] == "all_reduce");
  CHECK(fitted[0]["scope"] == "inter_node");
  CHECK(fitted[0]["samples"] == 3);
  // The planner reads it back: the preset's all-reduce across nodes takes the fitted time.
  const trainplan::catalog user = trainplan::catalog::load(dir);
  const trainplan::cluster_spec& c = user.cluster("dgx-h100");
  REQUIRE(c.fitted.size() == 2);
  CHECK(c.fitted_factor(trainplan::collective::all_reduce, trainplan::link_scope::inter_node) ==
        Approx(fitted[0]["factor"].get<double>()));
  // A second fit into the same file replaces the entry, and refusals name what is wrong.
  CHECK(run_plan("calibrate --cluster-from " + report + " --cluster dgx-h100 -o " + out.string()).exit_code == 0);
  CHECK(json::parse(slurp(out))["clusters"].size() == 1);
  plan_run wrong = run_plan("calibrate --cluster-from " + report + " --cluster dgx-a100 " + report);
  CHECK(wrong.exit_code == 2);
  CHECK_THAT(wrong.err, Catch::Contains("no other reports"));
  plan_run none = run_plan("calibrate");
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.err, Catch::Contains("--cluster-from"));
}
