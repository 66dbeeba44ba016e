// The main command, its options and errors, the list commands and plan validate, run as a user runs them.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <nlohmann/json.hpp>

#include "expect_refused.hpp"
#include "run_plan.hpp"

using namespace trainplan::test;
using json = nlohmann::json;

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

TEST_CASE("a fit with less headroom than the search's safety margin is called tight, in the text and the JSON", "[cli]") {
  // TinyLlama, micro-batch 8, amp-bf16 on an H100: 2,048 tokens leave 15 GiB, 2,822 (plan max seq's answer)
  // under 1% of the GPU; the calibration keeps 5% free in plan search.
  const std::string run = "--model tinyllama-1.1b --micro-batch 8 --precision amp-bf16 --gpu h100 --suggestions 0";
  // The verdict and the line after it (where a tight fit says why).
  auto verdict = [&](const std::string& seq) {
    const auto r = run_plan(run + " --seq " + seq);
    REQUIRE(r.exit_code == 0);
    const std::size_t at = r.out.find("Verdict:");
    REQUIRE(at != std::string::npos);
    return r.out.substr(at, r.out.find('\n', r.out.find('\n', at) + 1) - at);
  };
  const json roomy = json::parse(run_plan(run + " --seq 2048 --json").out);
  const json tight = json::parse(run_plan(run + " --seq 2822 --json").out);
  REQUIRE(roomy["fits"] == true);
  REQUIRE(tight["fits"] == true);
  const double gpu = tight["gpu"]["memory_bytes"], margin = tight["safety_margin_fraction"];
  CHECK(margin == 0.05);
  // tight exactly when the peak passes what the margin leaves
  CHECK(tight["tight"] == (tight["memory"]["peak_bytes"].get<double>() > gpu * (1 - margin)));
  CHECK(roomy["tight"] == (roomy["memory"]["peak_bytes"].get<double>() > gpu * (1 - margin)));
  CHECK(tight["tight"] == true);
  CHECK(roomy["tight"] == false);
  CHECK(verdict("2822").find("Verdict: FITS, tight: peak") != std::string::npos);
  CHECK(verdict("2822").find("\n  tight: less than the 5.0% of the GPU that plan search keeps free") != std::string::npos);
  CHECK(verdict("2048").find("tight") == std::string::npos);
  // A run that does not fit is never tight; its suggestions are, each by the same test.
  const json headline = json::parse(run_plan("--params 7B --seq 4096 --gpu h100 --json").out);
  CHECK(headline["tight"] == false);
  int tight_ones = 0;
  for (const json& sug : headline["suggestions"]) {
    CHECK(sug["tight"] == (sug["peak_bytes"].get<double>() > gpu * (1 - margin)));
    tight_ones += sug["tight"].get<bool>();
  }
  CHECK(tight_ones > 0);
  CHECK(tight_ones < static_cast<int>(headline["suggestions"].size()));
  const std::string text = run_plan("--params 7B --seq 4096 --gpu h100").out;
  CHECK(text.find("(changes the numerics, tight)") != std::string::npos);
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
  CHECK_FALSE(j["memory"].contains("master_weights_bytes"));  // autocast over fp32 weights: no master copy
  for (const char* k : {"weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes",
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
  // The components add up to the peak (a master copy, where the regime has one).
  std::uint64_t sum = j["memory"].value("master_weights_bytes", std::uint64_t{0});
  for (const char* k : {"weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes",
                        "logits_bytes", "activation_grads_bytes", "overhead_bytes"})
    sum += j["memory"][k].get<std::uint64_t>();
  CHECK(sum == j["memory"]["peak_bytes"].get<std::uint64_t>());
}

TEST_CASE("option --grad-dtype fp32 keeps bf16 and fp32 gradients: 6 bytes per parameter at the peak", "[cli][json]") {
  json j = json::parse(run_plan("--model gpt2 --seq 1024 --json --grad-dtype fp32 --framework trainplan").out);
  CHECK(j["run"]["grad_dtype"] == "fp32");
  CHECK(j["memory"]["peak_phase"] == "backward head");  // gradients exist from here on
  // GPT-2's 124,439,808 parameters, stored with the vocabulary padded to 50304 rows (llm.c's 124,475,904).
  CHECK(j["memory"]["gradients_bytes"].get<std::uint64_t>() == 6ull * 124475904);
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
  const auto dir = trainplan::test::scratch_dir("trainplan-validate");
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
    expect_refused("validate --layers 2 --hidden 32 --heads 4 --vocab 64 --seq 16 --no-report " + std::string(bad));
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
    expect_refused(std::string(args) + " --no-report");
  }
  // bench has no --no-report: each is refused for its own reason, named.
  for (const auto& [args, reason] : {std::pair{"bench --backend tpu", "unknown backend 'tpu'"},
                                     std::pair{"bench --kernels", "plan bench --backend cuda --kernels"}}) {
    expect_refused(args, {reason});
  }
}

TEST_CASE("options before a subcommand are refused, not silently dropped", "[cli]") {
  // plan --gpu l4 max micro-batch once answered for the default H100 and exited 0.
  for (const char* args : {"--gpu l4 max micro-batch --model gpt2", "--seq 512 --gpu l4 sweep --model gpt2", "--json models"}) {
    INFO(args);
    const plan_run r = run_plan(args);
    CHECK(r.exit_code == 2);
    CHECK(one_line(r.err));
    CHECK_THAT(r.err, Catch::Contains("before the subcommand"));
  }
  CHECK(run_plan("max micro-batch --model gpt2 --gpu l4").exit_code == 0);
}

TEST_CASE("a run with no suggestions asked for, or every lever kept, is not told that nothing fits", "[cli]") {
  // Llama-3.2-1B at s4096 b4 misses an H100 by 3.6 GiB; --recompute full alone fits. The report once said no
  // change fits and advised sharding 16 GiB of model state on an 80 GB GPU.
  const std::string run = "--model llama-3.2-1b --seq 4096 --micro-batch 4 --gpu h100";
  REQUIRE(run_plan(run + " --recompute full").exit_code == 0);
  const plan_run none = run_plan(run + " --suggestions 0");
  CHECK(none.exit_code == 1);
  CHECK_THAT(none.out, Catch::Contains("not searched (--suggestions 0)") && !Catch::Contains("no combination"));
  const plan_run kept = run_plan(run + " --keep recompute,batch,precision,optimizer,optimizer-impl,attention,adapters,gpus,offload,seq,ep,allocator,loss");
  CHECK(kept.exit_code == 1);
  CHECK_THAT(kept.out, Catch::Contains("levers --keep leaves free") && !Catch::Contains("shard it"));
}

TEST_CASE("a huge prime micro-batch gets its suggestions at once: the smaller divisors are not walked one by one", "[cli]") {
  // 2^31 - 1 is prime: the batch lever once tried every integer below it (and hung on 1T).
  const plan_run r = run_plan("--layers 2 --hidden 64 --heads 4 --vocab 64 --seq 16 --gpu h100 --micro-batch 2147483647");
  CHECK(r.exit_code == 1);
  CHECK_THAT(flowed(r.out), Catch::Contains("--micro-batch 1 --grad-accum 2147483647"));
}

TEST_CASE("plan validate runs one step past the first applied fp16 update, so the peak is the planner's", "[cli][validate]") {
  // This GPT shape overflows fp16 at GradScaler's first scale: the first update is skipped and creates no
  // AdamW state, so two steps ended at the first applied update and measured 3% below the planner's steady
  // state (a fuzz found it). A third step reaches it; the skipped update is marked in the timeline.
  const plan_run r = run_plan("validate --family gpt --layers 2 --hidden 96 --heads 2 --vocab 221 --seq 12 --precision fp16-mixed "
                              "--recompute selective --attention eager --dropout 0.5 --seed 0 --no-report --json");
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  REQUIRE(j["steps"].size() == 3);
  CHECK(j["steps"][0]["skipped"] == true);
  CHECK(j["steps"][1]["skipped"] == false);
  CHECK(j["pass"] == true);
  CHECK(j["delta_pct"] == 0.0);
  bool marked = false;
  for (const nlohmann::json& t : j["timeline"])
    marked = marked || t["phase"].get<std::string>().find("(update skipped: fp16 overflow)") != std::string::npos;
  CHECK(marked);
}

TEST_CASE("plan validate refuses a sequence longer than the learned positions, as plan does", "[cli][validate]") {
  // The harness's embedding once indexed past GPT-2's 1,024-row position table (a fuzz found it; ASan saw it).
  expect_refused("validate --model gpt2 --layers 1 --hidden 16 --heads 1 --vocab 32 --seq 1025", {"learned positions"});
  expect_refused("--model gpt2 --layers 1 --hidden 16 --heads 1 --vocab 32 --seq 1025", {"learned positions"});
}
