// The one output path (cli/output_file.hpp): regular files replaced atomically, devices and FIFOs written
// directly and never replaced, "-" for standard output, no temporary file left after an interrupt.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <filesystem>
#include <fstream>

#include "tests/cli/run_plan.hpp"

using trainplan::test::run_plan;
using trainplan::test::slurp;

namespace {

const std::string small_sweep = "sweep --model gpt2 --seq 128,256 --gpu h100 --quiet";

std::filesystem::path fresh_dir(const std::string& name) {
  return trainplan::test::scratch_dir(name);
}

bool is_char_device(const char* path) {
  struct stat st {};
  return ::stat(path, &st) == 0 && S_ISCHR(st.st_mode);
}

int partial_files(const std::filesystem::path& dir) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().find(".partial") != std::string::npos) ++n;
  return n;
}

}  // namespace

TEST_CASE("output to /dev/null and /dev/stdout is written, never replaced: the device stays a device", "[cli][output]") {
  REQUIRE(is_char_device("/dev/null"));
  auto r = run_plan(small_sweep + " -o /dev/null");
  CHECK(r.exit_code == 0);
  CHECK(is_char_device("/dev/null"));
  r = run_plan(small_sweep + " -o /dev/stdout");
  CHECK(r.exit_code == 0);
  CHECK(r.out.rfind("model,", 0) == 0);  // the CSV went to standard output
  CHECK(is_char_device("/dev/null"));
  r = run_plan(small_sweep + " -o -");
  CHECK(r.exit_code == 0);
  CHECK(r.out.rfind("model,", 0) == 0);
  // --emit goes through the same path.
  r = run_plan("--model gpt2 --seq 1024 --gpu h100 --emit deepspeed -o /dev/null");
  CHECK(r.exit_code == 0);
  CHECK(is_char_device("/dev/null"));
}

TEST_CASE("output into a FIFO is written through it instead of replacing it", "[cli][output]") {
  const auto dir = fresh_dir("trainplan-fifo");
  const auto fifo = dir / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // The test holds the read end open (O_RDWR opens a FIFO at once) before plan runs, so plan always finds a
  // reader: a reader thread could still be starting when plan looked, and then both waited forever. The
  // sweep's two rows fit the pipe's buffer; read back once plan is done.
  const int fd = ::open(fifo.c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(fd >= 0);
  const auto r = run_plan(small_sweep + " -o " + fifo.string());
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  std::string read_back;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) read_back.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);
  CHECK(r.exit_code == 0);
  struct stat st {};
  REQUIRE(::stat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  CHECK(read_back.rfind("model,", 0) == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a regular file is replaced whole, keeps its mode, and a symbolic link is written through", "[cli][output]") {
  const auto dir = fresh_dir("trainplan-regular");
  const auto file = dir / "sweep.csv";
  std::ofstream(file) << "old\n";
  std::filesystem::permissions(file, std::filesystem::perms(0640));
  auto r = run_plan(small_sweep + " -o " + file.string());
  CHECK(r.exit_code == 0);
  CHECK(slurp(file).rfind("model,", 0) == 0);
  CHECK((std::filesystem::status(file).permissions() & std::filesystem::perms::all) == std::filesystem::perms(0640));
  const auto link = dir / "link.csv";
  std::filesystem::create_symlink(file, link);
  std::ofstream(file) << "old\n";
  r = run_plan(small_sweep + " -o " + link.string());
  CHECK(r.exit_code == 0);
  CHECK(std::filesystem::is_symlink(link));
  CHECK(slurp(file).rfind("model,", 0) == 0);
  CHECK(partial_files(dir) == 0);
  // A folder is not a file: one line, exit 2, nothing left behind.
  r = run_plan(small_sweep + " -o " + dir.string());
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("folder") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("SIGINT or SIGTERM during a sweep: exit 130 or 143, no .partial file, the old output intact", "[cli][output]") {
  const auto dir = fresh_dir("trainplan-interrupt");
  const auto file = dir / "sweep.csv";
  for (const auto& [signal_name, expected] : {std::pair<std::string, int>{"INT", 130}, {"TERM", 143}}) {
    std::ofstream(file) << "previous good output\n";
    // About two million rows: seconds of work, so the signal lands mid-write.
    const std::string cmd = std::string(TRAINPLAN_PLAN_BINARY) +
                            " sweep --model gpt2 --seq 16:1024:+1 --micro-batch 1:256 --gpu h100,a100-80gb --quiet -o " +
                            file.string() + " 2>/dev/null & pid=$!; sleep 0.7; kill -" + signal_name +
                            " $pid; wait $pid; exit $?";
    const int status = std::system(("bash -c '" + cmd + "'").c_str());
    CHECK(WEXITSTATUS(status) == expected);
    CHECK(slurp(file) == "previous good output\n");
    CHECK(partial_files(dir) == 0);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("output to a descriptor's path goes through the descriptor: a log appended to keeps its content", "[cli][output]") {
  // `plan ... -o /dev/stdout >> log` once renamed the CSV over the file behind /dev/stdout: the log's earlier
  // lines were lost. The same for /proc/self/fd/1.
  const auto dir = fresh_dir("trainplan-output-fd");
  for (const std::string target : {"/dev/stdout", "/proc/self/fd/1"}) {
    INFO(target);
    const auto log = dir / "log";
    std::ofstream(log) << "EARLIER LINE\n";
    const std::string cmd = std::string(TRAINPLAN_PLAN_BINARY) + " " + small_sweep + " -o " + target + " >> " + log.string() + " 2>/dev/null";
    CHECK(std::system(cmd.c_str()) == 0);
    const std::string text = slurp(log);
    CHECK(text.rfind("EARLIER LINE\nmodel,", 0) == 0);  // the old line, then the CSV after it
  }
  const auto r = run_plan(small_sweep + " -o /dev/fd/9");  // not open in the child
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("/dev/fd/9") != std::string::npos);
}

TEST_CASE("a FIFO nobody reads is an error, not a hang, and a dangling link is followed, not replaced", "[cli][output]") {
  const auto dir = fresh_dir("trainplan-output-fifo");
  const auto fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto r = run_plan(small_sweep + " -o " + fifo.string());  // would block forever in open(2) without O_NONBLOCK
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("no process is reading it") != std::string::npos);

  const auto link = dir / "link.csv";
  std::filesystem::create_symlink("target.csv", link);  // relative, and target.csv does not exist yet
  r = run_plan(small_sweep + " -o " + link.string());
  CHECK(r.exit_code == 0);
  CHECK(std::filesystem::is_symlink(link));
  CHECK(slurp(dir / "target.csv").rfind("model,", 0) == 0);
}

TEST_CASE("a read-only file is not replaced", "[cli][output]") {
  // Root too (CI runs as root), whom access(2) lets write anything: the file's mode has no write bit.
  const auto dir = fresh_dir("trainplan-output-readonly");
  const auto file = dir / "kept.csv";
  std::ofstream(file) << "KEEP\n";
  std::filesystem::permissions(file, std::filesystem::perms::owner_read);
  const auto r = run_plan(small_sweep + " -o " + file.string());
  CHECK(r.exit_code == 2);
  CHECK(slurp(file) == "KEEP\n");
}

TEST_CASE("a path ending in a slash that names no folder yet is refused before any folder is made", "[cli][output]") {
  const auto dir = fresh_dir("trainplan-output-slash");
  const auto r = run_plan(small_sweep + " -o " + (dir / "new").string() + "/");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("names a folder"));
  CHECK_FALSE(std::filesystem::exists(dir / "new"));
  // A missing parent folder of a file is still made.
  CHECK(run_plan(small_sweep + " -o " + (dir / "made" / "out.csv").string()).exit_code == 0);
  CHECK(std::filesystem::is_regular_file(dir / "made" / "out.csv"));
}

TEST_CASE("an output never replaces a file the same command reads as an input", "[cli][output]") {
  const auto dir = fresh_dir("trainplan-output-input");
  const auto report = dir / "runs.jsonl", config = dir / "gpt2.json";
  std::filesystem::copy_file(trainplan::test::fixture("measurements/pytorch-hf-h100-2026-11-22.jsonl"), report);
  std::filesystem::copy_file(trainplan::test::fixture("hf/gpt2.json"), config);
  const std::string measured = slurp(report), original = slurp(config);
  // The segments written over the GPU measurements they were replayed from.
  trainplan::test::plan_run r = run_plan("check " + report.string() + " --segments-out " + report.string());
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("reads it as an input"));
  CHECK(slurp(report) == measured);
  // A sweep's rows written over the config it read, also through a symbolic link.
  std::filesystem::create_symlink(config, dir / "link.json");
  r = run_plan("sweep --quiet --hf-config " + config.string() + " --seq 512 -o " + (dir / "link.json").string());
  CHECK(r.exit_code == 2);
  CHECK(slurp(config) == original);
  CHECK(partial_files(dir) == 0);
  // calibrate updates the calibration file it writes: that is its job, not a lost input, also when --data-dir
  // loaded the same file (the README's `-o data/calibration.json`, then `--data-dir data`).
  const auto calibration = dir / "calibration.json";
  const std::string calibrate = "calibrate --framework hf --gpu h100 " + report.string() + " -o " + calibration.string();
  CHECK(run_plan(calibrate).exit_code != 2);
  CHECK(run_plan(calibrate).exit_code != 2);
  CHECK(std::filesystem::is_regular_file(calibration));
  const auto data = dir / "data";
  std::filesystem::create_directories(data);
  for (const char* name : {"gpus.json", "models.json", "calibration.json"})
    std::filesystem::copy_file(std::filesystem::path(TRAINPLAN_TEST_DATA) / ".." / ".." / "data" / name, data / name);
  r = run_plan(calibrate.substr(0, calibrate.find(" -o ")) + " --data-dir " + data.string() + " -o " + (data / "calibration.json").string());
  CHECK(r.exit_code != 2);
  CHECK(nlohmann::json::parse(slurp(data / "calibration.json"))["gpus"]["h100"]["profiles"]["hf"].contains("cuda_context_bytes"));
}
