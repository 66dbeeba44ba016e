// Issue 12: every input gets a right answer or one clear error (exit 2, one stderr line), never a crash,
// a hang, nan/inf in the output, or a wrong answer. One regression test per case the hostile-user run found,
// and a generated batch of bad command lines.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "tests/cli/expect_refused.hpp"
#include "tests/cli/run_plan.hpp"

using trainplan::test::expect_refused;
using trainplan::test::plan_run;
using trainplan::test::one_line;
using trainplan::test::run_plan;

namespace {


bool has_nan_or_inf(const std::string& s) {
  for (const char* bad : {"nan", "NaN", "inf", "Inf"})
    for (std::size_t p = s.find(bad); p != std::string::npos; p = s.find(bad, p + 1)) {
      // Words such as "info" or "infinite" are text, not numbers: a number is not followed by a letter.
      const std::size_t end = p + std::string(bad).size();
      const bool word_after = end < s.size() && std::isalpha(static_cast<unsigned char>(s[end]));
      const bool word_before = p > 0 && std::isalpha(static_cast<unsigned char>(s[p - 1]));
      if (!word_after && !word_before) return true;
    }
  return false;
}

std::filesystem::path fresh_dir(const std::string& name) {
  return trainplan::test::scratch_dir(name);
}

std::string gpu_entry(const std::string& memory, const std::string& bf16_tflops, const std::string& bandwidth = "1e12") {
  return "{\"gpus\": [{\"name\": \"odd-gpu\", \"aliases\": [], \"description\": \"test\", \"memory_bytes\": " + memory +
         ", \"memory_bandwidth_bytes_per_s\": " + bandwidth +
         ", \"host_link_bytes_per_s\": 1e10, \"peak_dense_tflops\": {\"fp32\": 10, \"tf32\": null, \"bf16\": " + bf16_tflops +
         ", \"fp16\": null, \"fp8\": null}, \"source\": \"test\"}]}";
}

}  // namespace

TEST_CASE("tp x pp past 64 bits is refused everywhere, never a division by zero", "[cli][errors][hardening]") {
  const std::string huge = " --tp 4294967296 --pp 4294967296";
  for (const std::string cmd : {"--model gpt2", "max seq --model gpt2", "sweep --model gpt2 --seq 128",
                                "search --model gpt2 --seq 128", "--model gpt2 --global-batch 8"})
    expect_refused(cmd + huge);
}

TEST_CASE("integers are parsed whole and floats must be finite", "[cli][errors][hardening]") {
  expect_refused("--model gpt2 --zero 4294967299 --gpus 2");
  expect_refused("search --model gpt2 --seq 1024 --margin nan");
  expect_refused("search --model gpt2 --seq 1024 --margin -1");
  expect_refused("max seq --model gpt2 --margin nan");
  expect_refused("validate --layers 2 --hidden 32 --heads 4 --vocab 64 --seq 16 --tolerance nan --no-report");
}

TEST_CASE("an empty option value is an error, not 'not given'", "[cli][errors][hardening]") {
  for (const char* opt : {"--seq", "--micro-batch", "--grad-accum", "--global-batch", "--dropout", "--gpus", "--tp", "--pp",
                          "--zero", "--offload", "--host-memory", "--finetune", "--lora-rank", "--lora-targets", "--precision",
                          "--framework"})
    expect_refused(std::string("--model gpt2 ") + opt + " \"\"");
}

TEST_CASE("files that are no files, never end, or hold numbers out of range: exit 2, never a hang", "[cli][errors][hardening]") {
  const auto dir = fresh_dir("trainplan-hard-files");
  expect_refused("--hf-config /dev/zero");
  const auto fifo = dir / "fifo.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  expect_refused("--hf-config " + fifo.string());  // would block forever on open/read
  expect_refused("--hf-config " + dir.string());   // a folder
  std::ofstream(dir / "huge.json") << R"({"model_type": "gpt2", "n_layer": 1e400, "n_embd": 64, "n_head": 4, "vocab_size": 100})";
  expect_refused("--hf-config " + (dir / "huge.json").string());
  const auto data = dir / "data";
  std::filesystem::create_directories(data);
  std::ofstream(data / "gpus.json") << gpu_entry("1e400", "10");
  expect_refused("--model gpt2 --gpu odd-gpu --data-dir " + data.string());
  std::filesystem::remove_all(dir);
}

TEST_CASE("GPU constants out of their sane ranges are refused, so nothing prints nan or inf", "[cli][errors][hardening]") {
  const auto dir = fresh_dir("trainplan-hard-gpus");
  const std::pair<std::string, std::string> bad[] = {
      {"18446744073709551615", "10"},  // 2^64 - 1 bytes: the budget would wrap to 0
      {"1073741824", "1e-320"},        // a peak of 1e-320 TFLOP/s: infinite step times
  };
  for (const auto& [memory, peak] : bad) {
    std::ofstream(dir / "gpus.json") << gpu_entry(memory, peak);
    expect_refused("--model gpt2 --gpu odd-gpu --data-dir " + dir.string());
    expect_refused("sweep --model gpt2 --seq 128 --gpu odd-gpu --format jsonl --data-dir " + dir.string());
  }
  std::ofstream(dir / "gpus.json") << gpu_entry("1073741824", "10", "1e-320");
  expect_refused("--model gpt2 --gpu odd-gpu --data-dir " + dir.string());
  std::filesystem::remove_all(dir);
}

TEST_CASE("report readers check every field: plot timeline, plot parity, calibrate", "[cli][errors][hardening]") {
  const auto dir = fresh_dir("trainplan-hard-reports");
  const std::pair<const char*, const char*> reports[] = {
      {"empty-timeline.json", R"({"predicted": {"peak_bytes": 1}, "measured": {"peak_bytes": 1}, "timeline": [],
                                   "backend": "cpu", "model": {"name": "m"}, "run": {"seq": 1, "micro_batch": 1, "grad_accum": 1}})"},
      {"no-backend.json", R"({"predicted": {"peak_bytes": 1}, "measured": {"peak_bytes": 1},
                              "timeline": [{"phase": "x", "predicted_bytes": 1, "measured_bytes": 1}]})"},
      {"wrong-type.json", R"({"predicted": {"peak_bytes": "many"}, "measured": {"peak_bytes": 1}, "timeline": 3})"},
      {"huge.json", R"({"predicted": {"peak_bytes": 1e400}, "measured": {}, "timeline": []})"},
      {"array.json", "[1, 2, 3]"}};
  for (const auto& [name, text] : reports) {
    std::ofstream(dir / name) << text;
    const std::string path = (dir / name).string();
    expect_refused("plot timeline --report " + path + " -o " + (dir / "t.svg").string());
    expect_refused("calibrate " + path);
    // Parity reads only the two peaks, which the first two reports have.
    if (std::string(name) != "empty-timeline.json" && std::string(name) != "no-backend.json")
      expect_refused("plot parity --reports " + path + " -o " + (dir / "p.svg").string());
  }
  // calibrate -o onto a file that holds other JSON.
  nlohmann::json p = nlohmann::json::parse(run_plan("--model gpt2 --gpu h100 --framework trainplan --json").out);
  nlohmann::json report = {{"backend", "cuda"}, {"gpu", {{"name", "h100"}}}, {"model", p["model"]}, {"run", p["run"]},
                           {"measured", {{"peak_bytes", p["memory"]["tensor_peak_bytes"]}}},
                           {"device", {{"context_bytes", 1u << 30}, {"workspace_bytes", 1u << 25},
                                       {"device_peak_bytes", p["memory"]["peak_bytes"]}, {"step_seconds", 0.5}}}};
  report["model"]["qkv_bias"] = false;
  std::ofstream(dir / "good.json") << report.dump();
  for (const char* other : {"[]", R"({"gpus": 3})", "\"text\""}) {
    std::ofstream(dir / "other.json") << other;
    expect_refused("calibrate " + (dir / "good.json").string() + " -o " + (dir / "other.json").string());
  }
  // 64-bit sums: a device peak near 2^63 is refused, not wrapped.
  report["device"]["device_peak_bytes"] = 9223372036854775807ull;
  std::ofstream(dir / "overflow.json") << report.dump();
  expect_refused("calibrate " + (dir / "overflow.json").string());
  std::filesystem::remove_all(dir);
}

TEST_CASE("report readers refuse counts that are no integers (1e30, -1.5) instead of casting them", "[cli][errors][hardening]") {
  // Regression (issue 12, scripts/test.sh --sanitize): nlohmann's get<std::uint64_t>() of a floating-point
  // JSON number is a cast whose result is undefined when the value is out of range (UBSan's
  // float-cast-overflow); plot timeline and calibrate took such counts from the report.
  const auto dir = fresh_dir("trainplan-hard-counts");
  nlohmann::json p = nlohmann::json::parse(run_plan("--model gpt2 --gpu h100 --framework trainplan --json").out);
  nlohmann::json good = {{"backend", "cuda"}, {"gpu", {{"name", "h100"}}}, {"model", p["model"]}, {"run", p["run"]},
                         {"measured", {{"peak_bytes", p["memory"]["tensor_peak_bytes"]}}},
                         {"device", {{"context_bytes", 1u << 30}, {"workspace_bytes", 1u << 25},
                                     {"device_peak_bytes", p["memory"]["peak_bytes"]}, {"step_seconds", 0.5}}}};
  good["model"]["qkv_bias"] = false;
  for (const double bad : {1e30, -1.5, 2.5}) {
    for (const auto& [a, b] : {std::pair{"model", "layers"}, {"run", "seq"}, {"device", "context_bytes"}}) {
      nlohmann::json report = good;
      report[a][b] = bad;
      std::ofstream(dir / "calibrate.json") << report.dump();
      INFO(a << "." << b << " = " << bad);
      expect_refused("calibrate " + (dir / "calibrate.json").string());
    }
    nlohmann::json timeline = {{"predicted", {{"peak_bytes", 1}}}, {"measured", {{"peak_bytes", 1}}}, {"backend", "cpu"},
                               {"timeline", {{{"phase", "x"}, {"predicted_bytes", 1}, {"measured_bytes", 1}}}},
                               {"model", {{"name", "m"}}}, {"run", {{"seq", bad}, {"micro_batch", 1}, {"grad_accum", 1}}}};
    std::ofstream(dir / "timeline.json") << timeline.dump();
    expect_refused("plot timeline --report " + (dir / "timeline.json").string() + " -o " + (dir / "t.svg").string());
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("calibrate -o onto a deeply nested file is exit 2, not a stack overflow", "[cli][errors][hardening]") {
  // Regression (issue 12): the file -o updates was written back with dump(), which recursed once per level
  // of a 200,000-deep array under a key the loader ignores.
  const auto dir = fresh_dir("trainplan-hard-deep");
  const std::size_t depth = 200'000;
  std::ofstream(dir / "calibration.json") << "{\"gpus\": {}, \"_note\": " << std::string(depth, '[') << std::string(depth, ']') << "}";
  expect_refused("calibrate --framework hf --gpu h100 " + std::string(TRAINPLAN_TEST_DATA) +
                   "/measurements/pytorch-hf-h100-2026-11-22.jsonl -o " + (dir / "calibration.json").string());
  std::filesystem::remove_all(dir);
}

TEST_CASE("max and search keep to the fit check's verdict, invalid options are exit 2", "[cli][errors][hardening]") {
  // Host memory with optimizer offload: the longest sequence max reports fits by the fit check, one more does not.
  const std::string base = "--model llama-2-7b --gpu h100 --framework trainplan --offload optimizer --gpus 2 --zero 1 --host-memory 60G";
  const plan_run mx = run_plan("max seq " + base + " --json");
  REQUIRE(mx.exit_code == 0);
  const std::uint64_t s = nlohmann::json::parse(mx.out)["value"];
  CHECK(run_plan(base + " --seq " + std::to_string(s)).exit_code == 0);
  CHECK(run_plan(base + " --seq " + std::to_string(s + 1)).exit_code == 1);
  expect_refused("max seq --model gpt2 --pp 5 --gpus 5");  // 5 does not divide gpt2's 12 layers
  expect_refused("search --model gpt2 --seq 1024 --pp 5 --gpus 5");
}

TEST_CASE("qlora on fp32, and validate with one step, are refused", "[cli][errors][hardening]") {
  expect_refused("--model llama-2-7b --finetune qlora --precision fp32 --framework trainplan");
  expect_refused("validate --layers 2 --hidden 32 --heads 4 --vocab 64 --seq 16 --steps 1 --no-report");
}

TEST_CASE("write failures and unwritable places are exit 2 with one line", "[cli][errors][hardening]") {
  plan_run r = run_plan("--model gpt2 --seq 1024 -o /dev/full --emit deepspeed");
  CHECK(r.exit_code == 2);
  CHECK(one_line(r.err));
  const std::string cmd = std::string(TRAINPLAN_PLAN_BINARY) + " --model gpt2 --seq 1024 >/dev/full 2>/dev/null";
  CHECK(WEXITSTATUS(std::system(cmd.c_str())) == 2);
  CHECK(WEXITSTATUS(std::system((std::string(TRAINPLAN_PLAN_BINARY) + " sweep --model gpt2 --seq 128 -o /dev/full 2>/dev/null").c_str())) == 2);
  // A TMPDIR that cannot be used (plot draws in a private temporary folder).
  const std::string plot = "TMPDIR=/dev/null/nowhere " + std::string(TRAINPLAN_PLAN_BINARY) +
                           " plot breakdown --model gpt2 --seq 512 -o /tmp/never-written.svg 2>/dev/null";
  CHECK(WEXITSTATUS(std::system(plot.c_str())) == 2);
}

TEST_CASE("a few hundred generated bad command lines keep the exit-code contract", "[cli][errors][hardening][fuzz]") {
  // Deterministic: options with hostile values, in random combinations. The contract: exit 0, 1 or 2 (never
  // 3 or a signal); on exit 2 exactly one stderr line; no nan or inf printed.
  const std::vector<std::string> options = {"--seq", "--micro-batch", "--grad-accum", "--dropout", "--gpus", "--tp", "--pp",
                                            "--zero", "--host-memory", "--lora-rank", "--params", "--layers", "--hidden",
                                            "--heads", "--kv-heads", "--ffn", "--vocab", "--global-batch", "--tokens"};
  const std::vector<std::string> values = {"0", "1", "-1", "nan", "inf", "-inf", "1e400", "18446744073709551616",
                                           "18446744073709551615", "4294967296", "9999999999999999999999", "0x10", "1.5",
                                           "7B", "1T", "4k", "1M", "abc", "''", "3", "12", "64", "1e-320", "+5", " 5"};
  const std::vector<std::string> commands = {"", "max seq", "sweep --quiet", "search"};
  std::mt19937 rng(20261123);
  auto pick = [&](const auto& v) { return v[rng() % v.size()]; };
  int runs = 0;
  for (int i = 0; i < 400; ++i) {
    std::string args = pick(commands) + " --model " + (i % 3 == 0 ? "gpt2" : i % 3 == 1 ? "tinyllama-1.1b" : "llama-2-7b");
    for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) args += " " + pick(options) + " '" + pick(values) + "'";
    if (args.find("max seq") == 0 && args.find("--seq") != std::string::npos) continue;
    INFO("plan " << args);
    const plan_run r = run_plan(args);
    CHECK((r.exit_code == 0 || r.exit_code == 1 || r.exit_code == 2));
    if (r.exit_code == 2) CHECK(one_line(r.err));
    CHECK_FALSE(has_nan_or_inf(r.out));
    ++runs;
  }
  CHECK(runs > 250);
}

TEST_CASE("an error is one printable line even when stderr cannot be written or the input holds a newline", "[cli][errors]") {
  // A full or closed stderr once aborted plan (exit 134): printing the error threw inside its catch block.
  for (const std::string redirect : {"2>/dev/full", ">/dev/full 2>&1", "2>&-"}) {
    INFO(redirect);
    const std::string cmd = std::string(TRAINPLAN_PLAN_BINARY) + " --model gpt2 --seq 0 " + redirect;
    const int status = std::system(cmd.c_str());
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 2));
  }
  const plan_run r = run_plan("--model 'gpt2\nfoo' --gpu h100");
  CHECK(r.exit_code == 2);
  CHECK(one_line(r.err));
  CHECK(r.err.find("gpt2\\nfoo") != std::string::npos);  // the newline shown escaped
  const plan_run long_name = run_plan("--model " + std::string(100000, 'x') + " --gpu h100");
  CHECK(long_name.exit_code == 2);
  CHECK(one_line(long_name.err));
  CHECK(long_name.err.size() < 1100);
}

TEST_CASE("a peak beyond 2^63 bytes is refused, below it the shortfall is exact", "[cli][errors]") {
  // 405B at 1M tokens x 100,000 sequences once printed "short by -8589934592.00 GiB" (the headroom saturated
  // at -2^63); at 1,000 sequences the peak (about 1.3e17 bytes) still plans, and JSON says exactly how short.
  const plan_run absurd = run_plan("--params 405B --seq 1M --micro-batch 100000 --gpu h100");
  CHECK(absurd.exit_code == 2);
  CHECK(one_line(absurd.err));
  CHECK(absurd.err.find("beyond 2^63") != std::string::npos);
  const plan_run large = run_plan("--params 405B --seq 1M --micro-batch 1000 --gpu h100 --json");
  REQUIRE(large.exit_code == 1);
  const auto j = nlohmann::json::parse(large.out);
  const std::uint64_t peak = j["memory"]["peak_bytes"], gpu = j["gpu"]["memory_bytes"];
  CHECK(peak > gpu);
  CHECK(j["memory"]["headroom_bytes"].get<std::int64_t>() == -static_cast<std::int64_t>(peak - gpu));
}

TEST_CASE("sweep and search assume what plan assumes: the default sequence capped by positions, no dropout for llm.c", "[cli][sweep]") {
  // Without --seq, plan takes 4096 capped by the model's learned positions (gpt2: 1024); sweep and search
  // once took 4096 and refused gpt2. llm.c has no dropout: plan, max, sweep and search all take 0.
  const plan_run sweep = run_plan("sweep --model gpt2 --gpu h100");
  CHECK(sweep.exit_code == 0);
  CHECK(sweep.out.find(",h100,85017493504,1024,") != std::string::npos);
  CHECK(sweep.err.find("--seq not given: assumed 1024") != std::string::npos);
  CHECK(run_plan("search --model gpt2 --gpu h100").exit_code == 0);
  const plan_run llmc = run_plan("sweep --model gpt2-xl --framework llmc --gpu h100 --seq 1024");
  CHECK(llmc.exit_code == 0);
  CHECK(llmc.out.find(",flash,0,") != std::string::npos);  // a row, attention flash, dropout 0
  CHECK(llmc.out.find("llm.c has no dropout") == std::string::npos);
  CHECK(run_plan("search --model gpt2-xl --framework llmc --gpu h100 --seq 1024").exit_code == 0);
}

TEST_CASE("a sweep of more than a hundred million configurations is refused at once", "[cli][sweep][errors]") {
  const plan_run r = run_plan("sweep --model gpt2 --micro-batch 1:1000000 --seq 1:1000000 --quiet");  // 10^12 rows
  CHECK(r.exit_code == 2);
  CHECK(one_line(r.err));
  CHECK(r.err.find("1000000000000 configurations") != std::string::npos);
}
