// Hostile inputs and long runs: every number read one way (decimal only, no spaces, in range, a message naming
// the option), data files that name the entry at fault, a closed pipe that ends quietly, outputs checked before
// the work, a chart of too many points refused, and progress only on a terminal.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/cli/expect_refused.hpp"
#include "tests/cli/run_plan.hpp"

using trainplan::test::expect_refused;
using trainplan::test::plan_run;
using trainplan::test::run_plan;
using trainplan::test::slurp;

namespace {

// Runs `plan ARGS | head -1` in bash and returns plan's own exit status (PIPESTATUS), its stderr in `err`.
int plan_into_head(const std::string& args, std::string& err) {
  trainplan::test::require_tag("cli", "runs the plan binary");
  static int counter = 0;
  const std::filesystem::path dir = trainplan::test::scratch_dir("trainplan-closed-pipe");
  const auto err_file = dir / ("err" + std::to_string(counter)), status_file = dir / ("status" + std::to_string(counter++));
  const std::string script = std::string(TRAINPLAN_PLAN_BINARY) + " " + args + " 2>" + err_file.string() +
                             " </dev/null | head -1 >/dev/null; echo ${PIPESTATUS[0]} >" + status_file.string();
  const std::string cmd = "bash -c '" + script + "'";
  REQUIRE(std::system(cmd.c_str()) == 0);
  err = slurp(err_file);
  return std::stoi(slurp(status_file));
}

void write_text(const std::filesystem::path& path, const std::string& text) { std::ofstream(path) << text; }

std::string gpus_json(const std::string& name_json) {
  return "{\"gpus\": [{\"name\": " + name_json +
         ", \"aliases\": [], \"description\": \"test\", \"memory_bytes\": 85899345920, \"memory_bandwidth_bytes_per_s\": "
         "3.35e12, \"host_link_bytes_per_s\": 5e10, \"peak_dense_tflops\": {\"fp32\": 67, \"tf32\": null, \"bf16\": 989, "
         "\"fp16\": null, \"fp8\": null}, \"source\": \"test\"}]}";
}

}  // namespace

TEST_CASE("options bound to numbers read decimal digits only, as plan's own do", "[cli][errors][hostile]") {
  // CLI11 alone read 0x10 as 16, ' 5' as 5, and -1 as the largest unsigned value.
  expect_refused("validate --tolerance 0x10", {"--tolerance", "0x10"});
  expect_refused("validate --tolerance ' 1'", {"--tolerance"});
  expect_refused("validate --tolerance nan", {"--tolerance"});
  expect_refused("max seq --model gpt2 --margin 0x0", {"--margin"});
  expect_refused("max seq --model gpt2 --margin ' 0.1'", {"--margin"});
  expect_refused("max seq --model gpt2 --margin 1", {"--margin", "below 1"});
  expect_refused("sweep --model gpt2 --seq 128 --threads 0x2", {"--threads"});
  expect_refused("sweep --model gpt2 --seq 128 --threads 0", {"--threads", "at least 1"});
  expect_refused("sweep --model gpt2 --seq 128 --threads 100000", {"--threads", "at most 1024"});
  expect_refused("check missing.jsonl --tensor-tolerance 0x1", {"--tensor-tolerance"});
  // Well-formed values still work.
  const plan_run r = run_plan("sweep --quiet --model gpt2 --seq 128 --threads 2");
  CHECK(r.exit_code == 0);
}

TEST_CASE("a range error names the option, not CLI11's Value x not in range", "[cli][errors][hostile]") {
  for (const std::string opt : {"--tensor-tolerance", "--device-tolerance"}) {
    const plan_run r = run_plan("check missing.jsonl " + opt + " abc");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(opt) && !Catch::Contains("not in range"));
  }
  expect_refused("check missing.jsonl --time-tolerance 5000", {"--time-tolerance", "from 0 to 1000"});
  expect_refused("validate --tolerance 101", {"--tolerance", "from 0 to 100"});
}

TEST_CASE("max --top is at least 1 and within 64 bits, never no limit", "[cli][errors][hostile]") {
  for (const std::string top : {"-1", "0", "18446744073709551616", "0x10", "' 3'", "3.5"})
    expect_refused("max seq --model gpt2 --levers precision --top " + top, {"--top"});
}

TEST_CASE("sweep and plot axes refuse spaces around or inside the numbers, not after a comma", "[cli][errors][hostile]") {
  expect_refused("sweep --model gpt2 --seq '  512'", {"--seq", "space"});
  expect_refused("sweep --model gpt2 --seq '512 '", {"--seq", "space"});
  expect_refused("sweep --model gpt2 --seq '512 ,1024'", {"--seq", "space"});
  expect_refused("sweep --model gpt2 --seq '1 :4'", {"--seq", "space"});
  expect_refused("sweep --model gpt2 --seq 128 --micro-batch '1 '", {"--micro-batch"});
  expect_refused("sweep --model gpt2 --seq 128 --dropout ' 0.1'", {"--dropout"});
  expect_refused("plot memory-vs-seq --model gpt2 --seq ' 512' -o never.svg", {"--seq"});
  CHECK_FALSE(std::filesystem::exists("never.svg"));
  // A list may still be written with a space after each comma.
  CHECK(run_plan("sweep --quiet --model gpt2 --seq '512, 1024'").exit_code == 0);
}

TEST_CASE("gpus.json names with nothing, a newline or a comma are refused, naming the file and entry", "[cli][errors][hostile]") {
  const auto dir = trainplan::test::scratch_dir("trainplan-hostile-gpus");
  for (const std::string name : {"\"\"", "\"odd\\ngpu\"", "\"odd,gpu\"", "\" odd\""}) {
    write_text(dir / "gpus.json", gpus_json(name));
    INFO(name);
    expect_refused("gpus --data-dir " + dir.string(), {"gpus.json", "gpus[0]"});
  }
  // An alias too.
  std::string with_alias = gpus_json("\"odd-gpu\"");
  with_alias.replace(with_alias.find("\"aliases\": []"), 13, "\"aliases\": [\"\"]");
  write_text(dir / "gpus.json", with_alias);
  expect_refused("gpus --data-dir " + dir.string(), {"gpus.json", "gpus[0]", "alias"});
  // A good name is read.
  write_text(dir / "gpus.json", gpus_json("\"odd-gpu\""));
  CHECK(run_plan("--model gpt2 --seq 128 --gpu odd-gpu --data-dir " + dir.string()).exit_code == 0);
}

TEST_CASE("a models.json shape the planner refuses is named by file and entry", "[cli][errors][hostile]") {
  const auto dir = trainplan::test::scratch_dir("trainplan-hostile-models");
  // kv_heads 5 does not divide heads 12: validate_model's message, with the file and entry added.
  write_text(dir / "models.json",
             "{\"models\": [{\"name\": \"odd-model\", \"family\": \"gpt\", \"nominal_params\": \"124M\", \"layers\": 2, "
             "\"hidden\": 768, \"heads\": 12, \"kv_heads\": 5, \"ffn\": 3072, \"vocab\": 50257, \"max_positions\": 1024, "
             "\"tied_embeddings\": true, \"dropout\": 0.0, \"source\": \"test\"}]}");
  expect_refused("models --data-dir " + dir.string(), {"models.json", "models[0]", "odd-model"});
}

TEST_CASE("a size past 64 bits names the options given", "[cli][errors][hostile]") {
  // Deep in the planner the message knows no option; main names the sizes given.
  // "parameter count is larger than 64 bits can hold" came with no option at all.
  const plan_run r = run_plan("--layers 16777216 --hidden 1048576 --heads 16 --ffn 16777216 --vocab 256 --seq 4096");
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(trainplan::test::one_line(r.err));
  CHECK_THAT(r.err, Catch::Contains("64 bits") && Catch::Contains("--layers 16777216") && Catch::Contains("--hidden 1048576"));
}

TEST_CASE("a closed pipe ends quietly with exit 0", "[cli][hostile]") {
  std::string err;
  // A sweep of megabytes into `head -1`: the reader leaves after the header.
  CHECK(plan_into_head("sweep --model gpt2 --seq 1:20000 --estimate", err) == 0);
  CHECK(err.empty());
  CHECK(plan_into_head("sweep --model gpt2 --seq 1:20000 --estimate --format jsonl -o -", err) == 0);
  CHECK(err.empty());
  // The fit check's report, and a JSON answer.
  CHECK(plan_into_head("--model gpt2 --seq 1024", err) == 0);
  CHECK(err.empty());
  CHECK(plan_into_head("max seq --model gpt2 --json", err) == 0);
  CHECK(err.empty());
}

TEST_CASE("a full disk under a sweep says why, not a guess", "[cli][errors][hostile]") {
  if (!std::filesystem::exists("/dev/full")) return;
  const plan_run r = run_plan("sweep --model gpt2 --seq 1:2000 --estimate -o /dev/full");
  CHECK(r.exit_code == 2);
  CHECK(trainplan::test::one_line(r.err));
  CHECK_THAT(r.err, Catch::Contains("/dev/full") && Catch::Contains("No space left") && !Catch::Contains("disk full?"));
}

TEST_CASE("a chart over too many sequence lengths is refused at once", "[cli][errors][hostile]") {
  const auto dir = trainplan::test::scratch_dir("trainplan-hostile-plot");
  expect_refused("plot memory-vs-seq --model gpt2 --seq 1:100000:+1 -o " + (dir / "m.svg").string(), {"2,000", "--seq"});
  expect_refused("plot recompute --model gpt2 --seq 1:3000 -o " + (dir / "r.svg").string(), {"2,000"});
  expect_refused("plot memory-vs-seq --model gpt2,tinyllama-1.1b --seq 1:1500 -o " + (dir / "m.svg").string(),
                 {"2 models", "2,000"});
  CHECK_FALSE(std::filesystem::exists(dir / "m.svg"));
}

TEST_CASE("a read-only output file is refused, for root too, and left as it was", "[cli][output][hostile]") {
  const auto dir = trainplan::test::scratch_dir("trainplan-hostile-readonly");
  const auto file = dir / "out.csv";
  write_text(file, "keep\n");
  ::chmod(file.c_str(), 0444);
  const plan_run r = run_plan("sweep --quiet --model gpt2 --seq 128 -o " + file.string());
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("read-only"));
  CHECK(slurp(file) == "keep\n");
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0444);
}

TEST_CASE("outputs are checked before the work: check --segments-out and plot -o", "[cli][output][measured][hostile]") {
  const auto dir = trainplan::test::scratch_dir("trainplan-hostile-early-output");
  const std::string report = trainplan::test::fixture("measurements/pytorch-hf-h100-2026-11-22.jsonl");
  // A folder: refused before the report's table is printed.
  plan_run r = run_plan("check " + report + " --segments-out " + dir.string());
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK_THAT(r.err, Catch::Contains("folder"));
  // A read-only file likewise.
  const auto locked = dir / "segments.jsonl";
  write_text(locked, "keep\n");
  ::chmod(locked.c_str(), 0444);
  r = run_plan("check " + report + " --segments-out " + locked.string());
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(slurp(locked) == "keep\n");
  // A chart into a folder: refused before a point is computed.
  std::filesystem::create_directories(dir / "chart.svg");
  expect_refused("plot breakdown --model gpt2 --seq 128 -o " + (dir / "chart.svg").string(), {"folder"});
}

TEST_CASE("progress is never written where stderr is not a terminal", "[cli][hostile]") {
  // A sweep long enough for the bar (more than a second of allocator replays), stderr into a file.
  const plan_run r = run_plan("sweep --model gpt2 --seq 64:8192:+64 --micro-batch 1:16 -o /dev/null");
  CHECK(r.exit_code == 0);
  CHECK(r.err.find('\r') == std::string::npos);
  CHECK(r.err.find("\x1b[") == std::string::npos);
  CHECK(r.out.find('\r') == std::string::npos);
}
