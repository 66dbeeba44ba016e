#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <nlohmann/json.hpp>

#include "run_plan.hpp"

using namespace trainplan::test;
using json = nlohmann::json;

namespace {

std::string fixture(const std::string& name) { return std::string(TRAINPLAN_TEST_DATA) + "/" + name; }

bool one_line(const std::string& s) { return !s.empty() && std::count(s.begin(), s.end(), '\n') == 1; }

}  // namespace

TEST_CASE("the main command: 7B at 4096 on an H100 does not fit and says what would", "[cli]") {
  plan_run r = run_plan("--params 7B --seq 4096 --gpu h100");
  CHECK(r.exit_code == 1);
  CHECK(r.err.empty());
  CHECK_THAT(r.out, Catch::Contains("llama-2-7b"));
  CHECK_THAT(r.out, Catch::Contains("6,738,415,616 parameters"));
  CHECK_THAT(r.out, Catch::Contains("DOES NOT FIT"));
  CHECK_THAT(r.out, Catch::Contains("What would make it fit"));
  CHECK_THAT(r.out, Catch::Contains("Assumptions"));
}

TEST_CASE("a run that fits exits 0", "[cli]") {
  plan_run r = run_plan("--model gpt2 --seq 1024 --micro-batch 8 --gpu a100-40gb");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("FITS"));
}

TEST_CASE("option --json prints one object with the documented fields, bytes as integers", "[cli][json]") {
  plan_run r = run_plan("--params 7B --seq 4096 --gpu h100 --json --tokens 1T");
  REQUIRE(r.exit_code == 1);
  json j = json::parse(r.out);
  for (const char* k : {"params", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "family"})
    CHECK(j["model"].contains(k));
  for (const char* k : {"seq", "micro_batch", "grad_accum", "precision", "grad_dtype", "optimizer", "recompute",
                        "attention", "dropout"})
    CHECK(j["run"].contains(k));
  CHECK(j["gpu"]["name"] == "h100");
  CHECK(j["gpu"]["memory_bytes"].is_number_unsigned());
  for (const char* k : {"weights_bytes", "master_weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes",
                        "activations_per_layer_bytes", "logits_bytes", "overhead_bytes", "peak_bytes"}) {
    INFO(k);
    CHECK(j["memory"][k].is_number_unsigned());
  }
  CHECK(j["memory"]["peak_phase"].is_string());
  CHECK(j["fits"] == false);
  CHECK(j["flops"]["model_per_step"].get<double>() > 0);
  CHECK(j["flops"]["hardware_per_step"].get<double>() >= j["flops"]["model_per_step"].get<double>());
  for (const char* k : {"step_seconds", "tokens_per_second", "mfu", "hfu", "time_to_train_seconds"}) CHECK(j["time"].contains(k));
  CHECK(j["model"]["params"] == 6738415616ull);
  CHECK(j["run"]["framework"] == "hf");          // the default: PyTorch + Hugging Face
  CHECK(j["run"]["precision"] == "amp-bf16");    // what the HF Trainer's bf16=True runs
  CHECK(j["run"]["grad_dtype"] == "fp32");       // autocast over an fp32 model: fp32 gradients
  CHECK_FALSE(j["suggestions"].empty());
  // The components add up to the peak.
  std::uint64_t sum = 0;
  for (const char* k : {"weights_bytes", "master_weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes",
                        "logits_bytes", "activation_grads_bytes", "overhead_bytes"})
    sum += j["memory"][k].get<std::uint64_t>();
  CHECK(sum == j["memory"]["peak_bytes"].get<std::uint64_t>());
}

TEST_CASE("option --grad-dtype fp32 keeps bf16 and fp32 gradients: 6 bytes per parameter at the peak", "[cli][json]") {
  json j = json::parse(run_plan("--model gpt2 --seq 1024 --json --grad-dtype fp32 --framework trainplan").out);
  CHECK(j["run"]["grad_dtype"] == "fp32");
  CHECK(j["memory"]["peak_phase"] == "backward head");  // gradients exist from here on
  CHECK(j["memory"]["gradients_bytes"].get<std::uint64_t>() == 6ull * 124439808);
}

TEST_CASE("shapes from the command line, a Hugging Face config, and --global-batch", "[cli]") {
  json j = json::parse(run_plan("--layers 4 --hidden 256 --heads 4 --vocab 1000 --seq 128 --json").out);
  CHECK(j["model"]["family"] == "llama");
  CHECK(j["model"]["ffn"] == 768);  // 8h/3 rounded up to 256
  CHECK(j["model"]["kv_heads"] == 4);
  j = json::parse(run_plan("--hf-config " + fixture("hf/llama-3.1-8b.json") + " --seq 8k --json").out);
  CHECK(j["model"]["params"] == 8030261248ull);
  CHECK(j["run"]["seq"] == 8192);
  j = json::parse(run_plan("--model gpt2 --seq 512 --micro-batch 4 --global-batch 64 --json").out);
  CHECK(j["run"]["grad_accum"] == 16);
  j = json::parse(run_plan("--model llama-2-7b --layers 2 --json --seq 128").out);
  CHECK(j["model"]["layers"] == 2);
  CHECK(j["model"]["hidden"] == 4096);
}

TEST_CASE("bad input: one line on stderr, exit 2, nothing half-printed", "[cli][errors]") {
  const char* cases[] = {
      "--params 7X --seq 4096",                     // malformed number
      "--params 7B --seq abc",                      // not a number
      "--params 7B --seq 0",                        // zero
      "--params 7B --seq -5",                       // negative
      "--params 7B --gpu h1000",                    // unknown GPU
      "--model llama-9",                            // unknown model
      "--model gpt2 --params 7B",                   // two model sources
      "--seq 4096",                                 // no model
      "--model gpt2 --seq 2048",                    // beyond learned positions
      "--layers 0 --hidden 64 --heads 4 --vocab 10",  // impossible shape
      "--layers 2 --hidden 64 --heads 5 --vocab 10",  // heads do not divide hidden
      "--model llama-3.1-8b --kv-heads 5",          // kv heads do not divide heads
      "--model gpt2 --seq 512 --micro-batch 99999999999999999999",  // beyond 64 bits
      "--model llama-3.1-405b --seq 1M --micro-batch 1M --attention eager",  // sizes beyond 64 bits
      "--model gpt2 --dropout 1.5",                 // not a probability
      "--model gpt2 --precision fp64",              // unknown regime
      "--model gpt2 --optimizer adam9",             // unknown optimizer
      "--model gpt2 --recompute some",              // unknown mode
      "--model gpt2 --attention sparse",            // unknown kind
      "--model gpt2 --grad-accum 2 --global-batch 8 --micro-batch 2",  // contradicting batch options
      "--model gpt2 --global-batch 7 --micro-batch 2",  // not a multiple
      "--model gpt2 --gpu v100-16gb",               // bf16 on Volta
      "--model gpt2 --no-such-flag",                // unknown option
      "--hf-config /nonexistent/config.json",       // unreadable file
      "--model gpt2 --tokens lots",                 // malformed tokens
      "--model gpt2 --data-dir /nonexistent",       // missing folder
  };
  for (const char* args : cases) {
    INFO(args);
    plan_run r = run_plan(args);
    CHECK(r.exit_code == 2);
    CHECK(one_line(r.err));
    CHECK_THAT(r.err, Catch::StartsWith("plan: error: "));
    CHECK(r.out.empty());
  }
  plan_run broken = run_plan("--hf-config " + fixture("hf/broken.json"));
  CHECK(broken.exit_code == 2);
  CHECK(one_line(broken.err));
  CHECK_THAT(broken.err, Catch::Contains("broken.json"));
}

TEST_CASE("help, version and the list commands exit 0", "[cli]") {
  plan_run help = run_plan("--help");
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out, Catch::Contains("--params") && Catch::Contains("--recompute") && Catch::Contains("Exit codes"));
  CHECK(run_plan("--version").exit_code == 0);
  plan_run gpus = run_plan("gpus");
  CHECK(gpus.exit_code == 0);
  CHECK_THAT(gpus.out, Catch::Contains("h100") && Catch::Contains("t4"));
  plan_run models = run_plan("models");
  CHECK(models.exit_code == 0);
  CHECK_THAT(models.out, Catch::Contains("124,439,808"));
}

TEST_CASE("issue 13's dense presets are listed and plan on an H100 with exit 0 or 1", "[cli]") {
  const plan_run models = run_plan("models");
  CHECK_THAT(models.out, Catch::Contains("9,241,705,984") && Catch::Contains("window 4096 on 21 of 42 layers"));
  for (const char* name : {"qwen2.5-0.5b", "qwen2.5-7b", "qwen2.5-72b", "llama-3.2-1b", "llama-3.2-3b", "gemma-2-9b", "phi-3-mini"}) {
    INFO(name);
    CHECK_THAT(models.out, Catch::Contains(name));
    const plan_run r = run_plan(fmt::format("--model {} --seq 4096 --gpu h100", name));
    CHECK((r.exit_code == 0 || r.exit_code == 1));  // fits or does not fit; 2 would be an input error
    CHECK_THAT(r.out, Catch::Contains("parameters"));
  }
  const plan_run g = run_plan("--model gemma-2-9b --seq 4096 --gpu h100 --json");
  REQUIRE((g.exit_code == 0 || g.exit_code == 1));
  const json j = json::parse(g.out);
  CHECK(j["model"]["head_dim"] == 256);
  CHECK(j["model"]["norms_per_layer"] == 4);
  CHECK(j["model"]["mlp_gate"] == "gelu_tanh");
  CHECK(j["model"]["sliding_window_tokens"] == 4096);
  CHECK(j["model"]["sliding_window_global_every"] == 2);
  CHECK(j["model"]["final_logit_softcap"] == 30.0);
  CHECK(j["model"]["params"] == 9241705984ull);
}

TEST_CASE("option --data-dir adds a GPU the built-in table lacks", "[cli]") {
  plan_run r = run_plan("--model gpt2 --seq 256 --gpu tiny-gpu --data-dir " + fixture("data_dir"));
  CHECK(r.exit_code == 1);  // 1 GiB cannot hold gpt2's 2 GB of model state
  CHECK_THAT(r.out, Catch::Contains("A 1 GiB test GPU"));
}

TEST_CASE("plan validate --backend cpu passes on a small shape and writes its reports", "[cli][validate]") {
  const auto dir = std::filesystem::temp_directory_path() / ("trainplan-validate-" + std::to_string(::getpid()));
  const std::string shape = "--layers 2 --hidden 32 --heads 4 --vocab 64 --seq 16 --micro-batch 2 --grad-accum 2 ";
  plan_run r = run_plan("validate " + shape + "--family gpt --attention eager --recompute selective --report-dir " +
                        dir.string() + " --timeline-csv " + (dir / "timeline.csv").string());
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("PASS") && Catch::Contains("delta +0.000%"));
  std::size_t json_reports = 0, md_reports = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    json_reports += e.path().extension() == ".json";
    md_reports += e.path().extension() == ".md";
  }
  CHECK(json_reports == 1);
  CHECK(md_reports == 1);
  const std::string csv = slurp(dir / "timeline.csv");
  CHECK_THAT(csv, Catch::StartsWith("event,phase,predicted_bytes,measured_bytes"));
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + 2 * 2 * (2 * 2 + 5) + 2);  // 2 steps x 2 micro-batches x events + 2 optimizer steps

  plan_run j = run_plan("validate " + shape + "--json --no-report");
  REQUIRE(j.exit_code == 0);
  json v = json::parse(j.out);
  CHECK(v["backend"] == "cpu");
  CHECK(v["predicted"]["peak_bytes"] == v["measured"]["peak_bytes"]);
  CHECK(v["delta_pct"] == 0.0);
  CHECK(v["pass"] == true);
  CHECK(v["tensors"].size() > 10);
  for (const json& t : v["tensors"]) CHECK(t["match"] == true);
  std::filesystem::remove_all(dir);
}

TEST_CASE("plan validate runs a tiny MoE given on the command line with --experts and --experts-per-token", "[cli][validate][moe]") {
  const std::string shape = "validate --layers 2 --hidden 32 --heads 4 --kv-heads 2 --ffn 16 --vocab 64 --seq 16 --micro-batch 2 "
                            "--grad-accum 2 --experts 4 --experts-per-token 2 --no-report ";
  for (const char* variant : {"", "--capacity-factor 1.0 --recompute full", "--capacity-factor 1.5 --json"}) {
    INFO(variant);
    plan_run r = run_plan(shape + variant);
    CHECK(r.exit_code == 0);
    if (std::string(variant).find("--json") != std::string::npos) {
      json v = json::parse(r.out);
      CHECK(v["pass"] == true);
      CHECK(v["predicted"]["peak_bytes"] == v["measured"]["peak_bytes"]);
    } else {
      CHECK_THAT(r.out, Catch::Contains("experts=4 top-2") && Catch::Contains("PASS") && Catch::Contains("delta +0.000%"));
    }
  }
  for (const char* bad : {"--experts 4",                            // no top-k
                          "--experts 4 --experts-per-token 5",      // more than the experts
                          "--experts-per-token 2",                  // top-k of a dense model
                          "--experts -1 --experts-per-token 1"}) {
    INFO(bad);
    plan_run r = run_plan("validate --layers 2 --hidden 32 --heads 4 --vocab 64 --seq 16 --no-report " + std::string(bad));
    CHECK(r.exit_code == 2);
    CHECK(one_line(r.err));
  }
}

TEST_CASE("plan validate refuses what the CPU harness cannot run", "[cli][validate][errors]") {
  for (const char* args : {"validate --params 7B --seq 4096",                    // far too large for the CPU backend
                           "validate --model gpt2 --seq 64 --backend cuda",      // no CUDA backend yet
                           "validate --model gpt2 --seq 64 --backend tpu",       // unknown backend
                           "validate --layers 2 --hidden 32 --heads 4 --vocab 64 --seq 16 --precision fp8-mixed",
                           "validate --layers 2 --hidden 32 --heads 4 --vocab 64 --seq 16 --optimizer lion",
                           "validate --layers 2 --hidden 32 --heads 4 --vocab 64 --seq 16 --steps 0",
                           "validate --suite cpu"}) {                              // unknown suite
    INFO(args);
    plan_run r = run_plan(std::string(args) + " --no-report");
    CHECK(r.exit_code == 2);
    CHECK(one_line(r.err));
  }
  // bench has no --no-report: each is refused for its own reason, named.
  for (const auto& [args, reason] : {std::pair{"bench --backend tpu", "unknown backend 'tpu'"},
                                     std::pair{"bench --kernels", "plan bench --backend cuda --kernels"}}) {
    INFO(args);
    plan_run r = run_plan(args);
    CHECK(r.exit_code == 2);
    CHECK(one_line(r.err));
    CHECK_THAT(r.err, Catch::Contains(reason));
  }
}

namespace {

// Splits one CSV line into fields (RFC 4180 quotes).
std::vector<std::string> csv_split(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') out.back() += '"', ++i;
      else if (c == '"') quoted = false;
      else out.back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("plan sweep writes the cross product as CSV with plan's field names", "[cli][sweep]") {
  plan_run r = run_plan("sweep --model gpt2,tinyllama-1.1b --seq 256:1024:x2 --micro-batch 1,4 --recompute none,full "
                        "--gpu h100,a100-40gb");
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> lines = lines_of(r.out);
  REQUIRE(lines.size() == 1 + 2 * 3 * 2 * 2 * 2);
  const std::vector<std::string> header = csv_split(lines[0]);
  for (const char* col : {"model", "seq", "micro_batch", "grad_accum", "precision", "recompute", "weights_bytes",
                          "optimizer_bytes", "activations_bytes", "peak_bytes", "peak_phase", "fits", "headroom_bytes",
                          "model_per_step", "step_seconds", "tokens_per_second", "mfu"})
    CHECK(std::find(header.begin(), header.end(), col) != header.end());
  const std::size_t peak_col = std::find(header.begin(), header.end(), "peak_bytes") - header.begin();
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> f = csv_split(lines[i]);
    REQUIRE(f.size() == header.size());
    CHECK(std::stoull(f[peak_col]) > 0);
  }
  // Each row equals what `plan --json` says of the same configuration.
  const std::vector<std::string> first = csv_split(lines[1]);
  json one = json::parse(run_plan("--model gpt2 --seq 256 --micro-batch 1 --recompute none --gpu h100 --json").out);
  CHECK(first[peak_col] == std::to_string(one["memory"]["peak_bytes"].get<std::uint64_t>()));
}

TEST_CASE("plan sweep quotes fields, writes JSON lines, reports invalid points, and writes files whole", "[cli][sweep]") {
  // A model name with a comma and a quote (from the config file's path) must be quoted in CSV.
  const auto dir = std::filesystem::temp_directory_path() / ("trainplan-sweep-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto odd = dir / "a,b\"c.json";
  std::filesystem::copy_file(fixture("hf/gpt2.json"), odd, std::filesystem::copy_options::overwrite_existing);
  plan_run r = run_plan("sweep --hf-config '" + odd.string() + "' --seq 512,2048");
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> lines = lines_of(r.out);
  REQUIRE(lines.size() == 3);
  const std::vector<std::string> header = csv_split(lines[0]);
  const std::vector<std::string> ok = csv_split(lines[1]), invalid = csv_split(lines[2]);
  REQUIRE(ok.size() == header.size());
  REQUIRE(invalid.size() == header.size());
  CHECK(ok[0] == "hf:" + odd.string());
  CHECK_THAT(lines[1], Catch::Contains("\"\""));  // the quote doubled
  CHECK_THAT(invalid.back(), Catch::Contains("learned positions"));  // seq 2048 > gpt2's 1024

  plan_run j = run_plan("sweep --model gpt2 --seq 256,512 --micro-batch 1:4:x2 --format jsonl");
  REQUIRE(j.exit_code == 0);
  const std::vector<std::string> rows = lines_of(j.out);
  REQUIRE(rows.size() == 6);
  for (const std::string& row : rows) {
    json v = json::parse(row);
    CHECK(v["model"] == "gpt2");
    CHECK(v["peak_bytes"].is_number_unsigned());
    CHECK(v["fits"].is_boolean());
  }
  const auto out = dir / "sweep.csv";
  plan_run f = run_plan("sweep --model gpt2 --seq 256:1024:x2 -o " + out.string());
  CHECK(f.exit_code == 0);
  CHECK(lines_of(slurp(out)).size() == 4);
  CHECK_FALSE(std::filesystem::exists(out.string() + ".partial"));
  // A failing sweep leaves the previous file untouched.
  plan_run bad = run_plan("sweep --model gpt2 --seq 256:128 -o " + out.string());
  CHECK(bad.exit_code == 2);
  CHECK(lines_of(slurp(out)).size() == 4);
  std::filesystem::remove_all(dir);
}

TEST_CASE("plan sweep, search, max and plot reject bad input with one line and exit 2", "[cli][sweep][errors]") {
  for (const char* args : {"sweep --model gpt2 --seq 1024:512", "sweep --model gpt2 --seq 512:1024:+0",
                           "sweep --model gpt2 --micro-batch 1,,2", "sweep --model gpt2 --seq abc",
                           "sweep --model gpt2 --format xml", "sweep --model gpt2,nope", "sweep --model gpt2 --gpu h100,h999",
                           "search --model gpt2 --seq 1024 --tokens-per-step 0", "search --model gpt2 --seq 1024 --grad-accum 2",
                           "max width --model gpt2", "max params --family gpt --seq 1024", "plot pie --model gpt2 -o /tmp/x.svg",
                           "plot breakdown --model gpt2 --seq 512 -o /tmp/x.jpg",
                           "plot breakdown --model gpt2 --seq 512 --gpu h100,a100-40gb -o /tmp/x.svg",
                           "plot parity -o /tmp/x.svg", "plot timeline --report /nonexistent.json -o /tmp/x.svg"}) {
    INFO(args);
    plan_run r = run_plan(args);
    CHECK(r.exit_code == 2);
    CHECK(one_line(r.err));
  }
}

TEST_CASE("plan search lists the best, the Pareto front and what breaks the budget", "[cli][search]") {
  plan_run r = run_plan("search --model gpt2 --seq 1024 --gpu a100-40gb --tokens-per-step 64k");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("Best by predicted tokens/s") && Catch::Contains("Why #1") &&
                        Catch::Contains("Pareto front") && Catch::Contains("Over the budget"));
  json j = json::parse(run_plan("search --model gpt2 --seq 1024 --gpu a100-40gb --tokens-per-step 64k --json").out);
  CHECK(j["best"][0]["recompute"] == "none");
  CHECK(j["best"][0]["fits"] == true);
  plan_run none = run_plan("search --model llama-3.1-405b --seq 4096 --gpu h100");
  CHECK(none.exit_code == 1);
  CHECK_THAT(none.out, Catch::Contains("Nothing fits"));
  // ...and then the cheapest ways out: the fewest H100s with ZeRO.
  plan_run ways = run_plan("search --model llama-2-7b --seq 4096 --gpu h100 --tokens-per-step 64k");
  CHECK(ways.exit_code == 1);
  CHECK_THAT(ways.out, Catch::Contains("What would make it fit") && Catch::Contains("--zero 3"));
}

TEST_CASE("plan search --levers finds pure bf16 and 8-bit AdamW with full recompute, labelled", "[cli][search][levers]") {
  // Issue 14. At the headline run's own batch (4,096 tokens), under the default 5% margin.
  const std::string base = "search --params 7B --seq 4096 --gpu h100 --levers precision,optimizer,recompute";
  const json j = json::parse(run_plan(base + " --tokens-per-step 4k --json").out);
  auto row = [](const json& rows, const std::string& changes) -> const json* {
    for (const json& r : rows)
      if (r["changes"] == changes) return &r;
    return nullptr;
  };
  const json* bf16 = row(j["by_change_set"], "--precision bf16");
  const json* adam8 = row(j["by_change_set"], "--recompute full --optimizer adamw-8bit");
  REQUIRE(bf16);
  REQUIRE(adam8);
  CHECK((*bf16)["cost"] == "changes the numerics");
  CHECK((*adam8)["cost"] == "changes the numerics");
  CHECK((*adam8)["fits"] == true);
  // Full recompute adds nothing to pure bf16 here (the peak is in foreach AdamW's step), so that pair is
  // not listed beside it; at the default 4M-token batch, where accumulation keeps the gradients through
  // the backward passes, it is the pair that fits.
  const json big = json::parse(run_plan(base + " --json").out);
  CHECK(row(big["by_change_set"], "--precision bf16") == nullptr);
  const json* bf16_full = row(big["by_change_set"], "--recompute full --precision bf16");
  REQUIRE(bf16_full);
  CHECK((*bf16_full)["peak_bytes"].get<std::uint64_t>() <= (*bf16_full)["budget_bytes"].get<std::uint64_t>());
  // Every listed combination, run as `plan` with its batch split, fits within the search's budget.
  for (const json& r : j["by_change_set"]) {
    const std::string flags = r["changes"].get<std::string>() + " --micro-batch " + std::to_string(r["micro_batch"].get<int>()) +
                              " --grad-accum " + std::to_string(r["grad_accum"].get<int>());
    INFO(flags);
    const json p = json::parse(run_plan("--params 7B --seq 4096 --gpu h100 " + flags + " --json").out);
    CHECK(p["memory"]["peak_bytes"] == r["peak_bytes"]);
  }
  plan_run text = run_plan(base + " --tokens-per-step 4k");
  CHECK(text.exit_code == 0);
  CHECK_THAT(text.out, Catch::Contains("The fastest for each combination of changes") && Catch::Contains("[changes the numerics]"));
  CHECK(run_plan(base + ",colour").exit_code == 2);
  CHECK(run_plan(base + ",seq").exit_code == 2);
}

TEST_CASE("plan max --levers: a ladder, each row reaching further, each as printed fitting", "[cli][max][levers]") {
  const std::string run = "--params 7B --gpu h100";
  plan_run r = run_plan("max seq " + run + " --levers precision,recompute,optimizer-impl --json");
  REQUIRE(r.exit_code == 0);  // nothing fits as given, but the levers reach somewhere
  const json j = json::parse(r.out);
  CHECK(j["fits"] == false);
  REQUIRE(j["with_levers"].size() >= 2);
  std::uint64_t previous = 0;
  for (const json& row : j["with_levers"]) {
    const std::uint64_t seq = row["value"];
    CHECK(seq > previous);
    previous = seq;
    std::string flags;
    for (const json& c : row["changes"]) flags += " " + c.get<std::string>();
    INFO(flags);
    CHECK(run_plan(run + flags + " --seq " + std::to_string(seq)).exit_code == 0);
    CHECK(run_plan(run + flags + " --seq " + std::to_string(seq + 1)).exit_code == 1);
  }
  CHECK(run_plan("max micro-batch --model gpt2 --seq 1024 --levers batch").exit_code == 2);
  CHECK(run_plan("max seq " + run + " --levers seq").exit_code == 2);
}

TEST_CASE("plan max: the value fits and one more does not", "[cli][max]") {
  json seq = json::parse(run_plan("max seq --model llama-3.1-8b --gpu h200 --recompute full --framework trainplan --json").out);
  REQUIRE(seq["fits"] == true);
  const std::uint64_t s = seq["value"];
  CHECK(run_plan("--model llama-3.1-8b --gpu h200 --recompute full --framework trainplan --seq " + std::to_string(s)).exit_code == 0);
  CHECK(run_plan("--model llama-3.1-8b --gpu h200 --recompute full --framework trainplan --seq " + std::to_string(s + 1)).exit_code == 1);
  // The same under the default hf profile, with pure bf16 (an fp32 model with foreach AdamW needs 20 bytes a parameter).
  json hf = json::parse(run_plan("max seq --model llama-3.1-8b --gpu h200 --recompute full --precision bf16 --json").out);
  REQUIRE(hf["fits"] == true);
  const std::uint64_t hs = hf["value"];
  CHECK(run_plan("--model llama-3.1-8b --gpu h200 --recompute full --precision bf16 --seq " + std::to_string(hs)).exit_code == 0);
  CHECK(run_plan("--model llama-3.1-8b --gpu h200 --recompute full --precision bf16 --seq " + std::to_string(hs + 1)).exit_code == 1);
  json mb = json::parse(run_plan("max micro-batch --model gpt2 --seq 1024 --gpu a100-40gb --json").out);
  const std::uint64_t b = mb["value"];
  CHECK(run_plan("--model gpt2 --seq 1024 --gpu a100-40gb --micro-batch " + std::to_string(b)).exit_code == 0);
  CHECK(run_plan("--model gpt2 --seq 1024 --gpu a100-40gb --micro-batch " + std::to_string(b + 1)).exit_code == 1);
  json params = json::parse(run_plan("max params --seq 4096 --gpu h100 --recompute full --json").out);
  CHECK(params["value"].get<std::uint64_t>() > 3'000'000'000ull);  // 16 bytes/param: at most ~5B on 80 GB
  CHECK(params["value"].get<std::uint64_t>() < 5'400'000'000ull);
  CHECK(run_plan("max seq --model llama-3.1-405b --gpu h100").exit_code == 1);
}

TEST_CASE("every plot kind writes a valid SVG and PNG", "[cli][plot]") {
  const auto dir = std::filesystem::temp_directory_path() / ("trainplan-plot-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  REQUIRE(run_plan("validate --layers 2 --hidden 32 --heads 4 --vocab 64 --seq 16 --grad-accum 2 --report-dir " + dir.string())
              .exit_code == 0);
  std::string report;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json") report = e.path().string();
  REQUIRE_FALSE(report.empty());
  const std::pair<const char*, std::string> kinds[] = {
      {"memory-vs-seq", "--model llama-3.1-8b --seq 512:8k:x2"},
      {"memory-vs-seq", "--model gpt2,tinyllama-1.1b --seq 256:2k:x2"},
      {"recompute", "--model gpt2 --seq 256:1024:x2 --attention eager"},
      {"breakdown", "--model llama-3.1-8b --seq 4096"},
      {"time-breakdown", "--model gpt2 --seq 1024 --micro-batch 4"},
      {"timeline", "--model gpt2 --seq 512 --grad-accum 2"},
      {"timeline", "--report " + report},
      {"parity", "--reports " + report + " " + report}};
  int n = 0;
  for (const auto& [kind, options] : kinds)
    for (const char* ext : {".svg", ".png"}) {
      const auto out = dir / (std::string(kind) + std::to_string(n++) + ext);
      INFO(kind << " " << options << " " << ext);
      plan_run r = run_plan(std::string("plot ") + kind + " " + options + " -o " + out.string());
      REQUIRE(r.exit_code == 0);
      const std::string content = slurp(out);
      if (std::string(ext) == ".svg") {
        CHECK_THAT(content, Catch::Contains("<svg") && Catch::Contains("</svg>"));
        CHECK_THAT(content, Catch::Contains("<title>"));  // gnuplot titles every SVG it writes
      } else {
        REQUIRE(content.size() > 1000);
        CHECK(content.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
      }
    }
  std::filesystem::remove_all(dir);
}

TEST_CASE("plan calibrate fits GPU reports, writes calibration.json, and the planner reads it back", "[cli][calibrate]") {
  // Stand-ins for CUDA reports: each run "measures" exactly what the planner predicts for the h100 with
  // the built-in calibration, so the fit must give that calibration back with no error, and a report
  // whose device used 10% more memory must move the context estimate.
  const auto dir = std::filesystem::temp_directory_path() / ("trainplan-calibrate-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "reports");
  int k = 0;
  for (const char* config : {"--seq 512 --micro-batch 1", "--seq 1024 --micro-batch 4", "--seq 1024 --micro-batch 16"}) {
    json p = json::parse(run_plan(std::string("--model gpt2 --gpu h100 --framework trainplan --json ") + config).out);
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
  CHECK(written["gpus"]["h100"]["cuda_context_bytes"] == 1073741824ull);
  CHECK(written["gpus"]["h100"]["allocator_slack_fraction"].get<double>() == Approx(0.02).margin(1e-4));
  CHECK(written["gpus"]["h100"]["timing"]["trainplan"]["gemm_efficiency"].is_number());
  CHECK(written["gpus"].contains("a100-40gb"));  // the other entries are kept
  // The planner loads the new file through --data-dir.
  CHECK(run_plan("--model gpt2 --seq 512 --data-dir " + out.parent_path().string()).exit_code == 0);

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
  CHECK_THAT(r.out, Catch::Contains("--zero 3") && Catch::Contains("--offload optimizer") &&
                        Catch::Contains("--finetune lora"));
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
                          "--model gpt2 --lora-targets q,x", "--model gpt2 --host-memory lots", "--model gpt2 --gpus 0"}) {
    INFO(bad);
    plan_run e = run_plan(bad);
    CHECK(e.exit_code == 2);
    CHECK(one_line(e.err));
  }
}

TEST_CASE("option --emit writes configs for DeepSpeed, FSDP (Accelerate), the HF Trainer and torchtitan", "[cli][emit]") {
  const auto dir = std::filesystem::temp_directory_path() / ("trainplan-emit-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
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

  REQUIRE(run_plan("--model llama-3.1-8b --seq 8k --gpu h100 --gpus 16 --tp 2 --zero 3 --recompute selective --framework trainplan --emit torchtitan -o " +
                   (dir / "tt.toml").string()).exit_code == 0);
  const std::string tt = slurp(dir / "tt.toml");
  CHECK_THAT(tt, Catch::Contains("seq_len = 8192") && Catch::Contains("data_parallel_shard_degree = 8") &&
                     Catch::Contains("pipeline_parallel_degree = 1") &&
                     Catch::Contains("tensor_parallel_degree = 2") && Catch::Contains("mode = \"selective\"") &&
                     Catch::Contains("global_batch_size = 8"));

  for (const char* bad : {"--model gpt2 --emit megatron -o /tmp/x", "--model gpt2 --emit deepspeed",
                          "--model gpt2 --gpus 2 --zero 1 --emit fsdp -o /tmp/x.yaml",
                          "--model gpt2 --finetune lora --emit torchtitan -o /tmp/x.toml", "--model gpt2 -o /tmp/x.json"}) {
    INFO(bad);
    plan_run e = run_plan(bad);
    CHECK(e.exit_code == 2);
    CHECK(one_line(e.err));
  }
  std::filesystem::remove_all(dir);
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
  plan_run r = run_plan("check " + shared);
  // Three runs' reserved bytes are known gaps of the allocator replay (issue 9), so not all are within 5%.
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out, Catch::Contains("S1") && Catch::Contains("S14") && Catch::Contains("torch 2.11.0"));
  // Each tolerance decides the exit code on its own: with the memory ones met and time not checked (the
  // step-time accuracy, S5's known gap included, is tested in tests/planner/test_step_time.cpp), exit 0;
  // at the default 20% on time, S5 makes it 1.
  CHECK(run_plan("check " + shared + " --device-tolerance 20 --time-tolerance 1000").exit_code == 0);
  CHECK(run_plan("check " + shared + " --device-tolerance 20").exit_code == 1);
  // Bad reports: one line, exit 2.
  const auto dir = std::filesystem::temp_directory_path() / ("trainplan-check-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::pair<const char*, const char*> bad[] = {
      {"empty.jsonl", ""},
      {"noenv.jsonl", "{\"id\": \"S1\"}\n"},
      {"broken.jsonl", "{\"id\": \"env\", \"gpu\": \"x\", \"torch\": \"t\", \"transformers\": \"t\", \"context_bytes\": 1, \"gpu_total_bytes\": 2}\n{not json\n"},
      {"field.jsonl", "{\"id\": \"env\", \"gpu\": \"x\", \"torch\": \"t\", \"transformers\": \"t\", \"context_bytes\": 1, \"gpu_total_bytes\": 2}\n"
                      "{\"id\": \"S1\", \"model\": {\"fam\": \"gpt2\", \"L\": 2, \"h\": 64, \"a\": 4, \"V\": 100}, \"seq\": -5}\n"}};
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

TEST_CASE("plan calibrate --framework hf takes PyTorch's CUDA context from collector reports", "[cli][calibrate][hf]") {
  const auto dir = std::filesystem::temp_directory_path() / ("trainplan-calibrate-hf-" + std::to_string(::getpid()));
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
  CHECK_THAT(r.out, Catch::Contains("1.00 GiB") && Catch::Contains("S14"));
  json p = json::parse(run_plan("--model gpt2 --seq 512 --json --data-dir " + (dir / "data").string()).out);
  CHECK(p["memory"]["overhead"]["cuda_context_bytes"] == 1073741824ull);
  CHECK(run_plan("calibrate --framework megatron " + (dir / "report.jsonl").string()).exit_code == 2);
  std::filesystem::remove_all(dir);
}

TEST_CASE("the headline run's suggestions, run as suggested, fit", "[cli][suggest]") {
  const std::string base = "--params 7B --seq 4096 --gpu h100";
  plan_run r = run_plan(base + " --json");
  REQUIRE(r.exit_code == 1);
  const json j = json::parse(r.out);
  REQUIRE(j["suggestions"].size() >= 5);
  for (const json& s : j["suggestions"]) {
    std::string flags;
    for (const json& c : s["changes"]) flags += " " + c.get<std::string>();
    INFO(flags);
    CHECK(run_plan(base + flags).exit_code == 0);
    CHECK(s["cost"].is_string());
  }
  CHECK(j["suggestions"][0]["cost"] == "slower");  // offload keeps the numerics and the GPU
  // Each roomiest form (the suggestion plus same-numerics levers), run as printed, fits too.
  for (const json& s : j["suggestions"]) {
    if (s["roomiest"].is_null()) continue;
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
  CHECK_THAT(text.out, Catch::Contains("latent attention (kv rank 512, q rank 1536, RoPE dim 64, v dim 128)") &&
                           Catch::Contains("3 dense first layers of width 18432") &&
                           Catch::Contains("an MoE layer keeps"));
  // The harness cannot run latent attention: validate says so and exits 2.
  plan_run harness = run_plan("validate --model deepseek-v3 --seq 64 --backend cpu");
  CHECK(harness.exit_code == 2);
  CHECK_THAT(harness.err, Catch::Contains("latent attention"));
}
