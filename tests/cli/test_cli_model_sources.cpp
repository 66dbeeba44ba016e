// Where `plan` finds a model: --hf-config with a model's folder, --model with a repository in the local Hugging
// Face cache (HF_HUB_CACHE pointed at a made-up cache), and the one-line refusals when neither holds one.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>

#include "tests/cli/expect_refused.hpp"
#include "tests/cli/run_plan.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan::test;
namespace fs = std::filesystem;

namespace {
// GPT-2's config.json cached as huggingface_hub leaves it: a blob, the snapshot's link to it, refs/main.
fs::path fake_cache(const std::string& name) {
  const fs::path cache = scratch_dir(name);
  const fs::path repo = cache / "models--someone--my-gpt2";
  fs::create_directories(repo / "blobs");
  fs::copy_file(hf_fixture("gpt2.json"), repo / "blobs" / "10c66461e4c109db5a2196bff4bb59be30396ed8");
  fs::create_directories(repo / "snapshots" / "607a30d783dfa663caf39e06633721c8d4cfcd7e");
  fs::create_symlink("../../blobs/10c66461e4c109db5a2196bff4bb59be30396ed8",
                     repo / "snapshots" / "607a30d783dfa663caf39e06633721c8d4cfcd7e" / "config.json");
  fs::create_directories(repo / "refs");
  std::ofstream(repo / "refs" / "main") << "607a30d783dfa663caf39e06633721c8d4cfcd7e";
  ::setenv("HF_HUB_CACHE", cache.string().c_str(), 1);  // each test case runs in its own process
  return cache;
}
}  // namespace

TEST_CASE("plan --hf-config with a model's folder reads the config.json in it", "[cli]") {
  const fs::path dir = scratch_dir("trainplan-cli-hf-folder");
  fs::copy_file(hf_fixture("gpt2.json"), dir / "config.json");
  const plan_run folder = run_plan("--hf-config " + dir.string() + " --seq 1024 --gpu h100");
  const plan_run file = run_plan("--hf-config " + (dir / "config.json").string() + " --seq 1024 --gpu h100");
  INFO(folder.err);
  CHECK(folder.exit_code == 0);
  CHECK(folder.out == file.out);
  CHECK_THAT(folder.out, Catch::Contains((dir / "config.json").string()));
  fs::remove(dir / "config.json");
  expect_refused("--hf-config " + dir.string() + " --seq 1024 --gpu h100", {"--hf-config", (dir / "config.json").string()});
  expect_refused("--hf-config " + (dir / "absent").string() + " --seq 1024 --gpu h100", {"--hf-config", "no such file or folder"});
}

TEST_CASE("plan --model with a repository in the Hugging Face cache reads its config and says which file", "[cli]") {
  const fs::path cache = fake_cache("trainplan-cli-hf-cache");
  const plan_run r = run_plan("--model someone/my-gpt2 --seq 1024 --gpu h100");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  const std::vector<std::string> lines = lines_of(r.out);
  REQUIRE_FALSE(lines.empty());
  CHECK(lines.front().starts_with("trainplan: someone/my-gpt2 on "));
  // The header (everything before the memory table) names the file read: the snapshot of the repository's folder.
  const std::string header = flowed(r.out.substr(0, r.out.find("\nMemory at the peak")));
  CHECK_THAT(header, Catch::Contains("read snapshots/607a30d783dfa663caf39e06633721c8d4cfcd7e/config.json of the "
                                     "Hugging Face cache's " + (cache / "models--someone--my-gpt2").string()));
  // GPT-2 small by hand: 50257 x 768 tied embedding + 1024 x 768 positions + 12 x 7,087,872 + 1,536 = 124,439,808.
  CHECK_THAT(header, Catch::Contains("124,439,808 parameters"));
}

TEST_CASE("plan --model with a name neither the catalog nor the cache holds is refused with the closest", "[cli]") {
  const fs::path cache = fake_cache("trainplan-cli-hf-cache-unknown");
  expect_refused("--model someone/my-gtp2 --seq 1024 --gpu h100",
                 {"--model", "someone/my-gtp2", (cache / "models--someone--my-gtp2").string(), "did you mean 'someone/my-gpt2'"});
  expect_refused("--model llama-3.1-8bb --seq 1024 --gpu h100", {"--model", "did you mean 'llama-3.1-8b'"});
}
