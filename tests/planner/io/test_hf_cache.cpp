// Finding config.json on disk (planner/io/hf_cache.hpp), against the layout huggingface_hub documents: the
// Hub's "local cache" reference (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub;
// models--org--name/refs/main naming snapshots/<commit>/) and validate_repo_id's rules, on made-up folders.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>

#include "planner/io/hf_cache.hpp"
#include "planner/util/input_error.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
namespace fs = std::filesystem;

namespace {

env_lookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A cached repository as huggingface_hub leaves it: the file in blobs/, the snapshot's config.json a link to it.
fs::path cached_repo(const fs::path& cache, const std::string& folder, const std::string& commit, bool with_ref = true) {
  const fs::path repo = cache / folder;
  write(repo / "blobs" / "0f1e2d", "{\"model_type\": \"gpt2\"}");
  fs::create_directories(repo / "snapshots" / commit);
  fs::create_symlink(fs::path("../../blobs/0f1e2d"), repo / "snapshots" / commit / "config.json");
  if (with_ref) write(repo / "refs" / "main", commit);  // as huggingface_hub writes it: the hash, no newline
  return repo;
}

}  // namespace

TEST_CASE("the hub cache folder follows HF_HUB_CACHE then HF_HOME then the home folder", "[unit]") {
  CHECK(hf_hub_cache_dir(env_of({{"HF_HUB_CACHE", "/c"}, {"HF_HOME", "/h"}, {"HOME", "/u"}})) == fs::path("/c"));
  CHECK(hf_hub_cache_dir(env_of({{"HF_HOME", "/h"}, {"HOME", "/u"}})) == fs::path("/h/hub"));
  CHECK(hf_hub_cache_dir(env_of({{"XDG_CACHE_HOME", "/x"}, {"HOME", "/u"}})) == fs::path("/x/huggingface/hub"));
  CHECK(hf_hub_cache_dir(env_of({{"HOME", "/u"}})) == fs::path("/u/.cache/huggingface/hub"));
  CHECK(hf_hub_cache_dir(env_of({{"HF_HOME", "~/hf"}, {"HOME", "/u"}})) == fs::path("/u/hf/hub"));  // expanduser
  CHECK(hf_hub_cache_dir(env_of({{"HF_HUB_CACHE", ""}, {"HOME", "/u"}})) == fs::path("/u/.cache/huggingface/hub"));
  CHECK_FALSE(hf_hub_cache_dir(env_of({})).has_value());
}

TEST_CASE("repository ids are those the Hub accepts, so a lookup stays inside the cache", "[unit]") {
  for (const char* id : {"gpt2", "meta-llama/Llama-3.1-8B", "Qwen/Qwen2.5-0.5B", "org_1/name.v2"}) CHECK(is_hf_repo_id(id));
  for (const char* id : {"", "a/b/c", "../etc", "org/..", "org/-x", "org/x.", "a--b/c", "/abs", "org/", "a b/c", "a\\b"})
    CHECK_FALSE(is_hf_repo_id(id));
  CHECK_FALSE(is_hf_repo_id(std::string(97, 'a')));
  CHECK(hf_cache_repo_dir("/c", "meta-llama/Llama-3.1-8B") == fs::path("/c/models--meta-llama--Llama-3.1-8B"));
  CHECK(hf_cache_repo_dir("/c", "gpt2") == fs::path("/c/models--gpt2"));
}

TEST_CASE("a cached repository's config is the snapshot refs/main names", "[unit]") {
  const fs::path cache = test::scratch_dir("trainplan-hf-cache-ref");
  const fs::path repo = cached_repo(cache, "models--acme--tiny", "4f2a0c9e1b7d3a5c8e6f0b2d4a6c8e0f1a3b5c7d");
  fs::create_directories(repo / "snapshots" / "older");  // another revision, not the one main names
  const std::optional<hf_cached_config> found = find_hf_cached_config(repo, "--model acme/tiny");
  REQUIRE(found.has_value());
  CHECK(found->revision == "4f2a0c9e1b7d3a5c8e6f0b2d4a6c8e0f1a3b5c7d");
  CHECK(found->config_path == repo / "snapshots" / "4f2a0c9e1b7d3a5c8e6f0b2d4a6c8e0f1a3b5c7d" / "config.json");
  CHECK_FALSE(find_hf_cached_config(cache / "models--acme--other", "--model acme/other").has_value());
  const std::vector<std::string> ids = hf_cached_repo_ids(cache);
  CHECK(ids == std::vector<std::string>{"acme/tiny"});
}

TEST_CASE("a cached repository without refs/main is read only when it has one snapshot", "[unit]") {
  const fs::path cache = test::scratch_dir("trainplan-hf-cache-pinned");
  const fs::path repo = cached_repo(cache, "models--acme--pinned", "abc123", false);
  const std::optional<hf_cached_config> found = find_hf_cached_config(repo, "--model acme/pinned");
  REQUIRE(found.has_value());
  CHECK(found->revision == "abc123");
  fs::create_directories(repo / "snapshots" / "def456");
  CHECK_THROWS_WITH(find_hf_cached_config(repo, "--model acme/pinned"),
                    Catch::Contains("--model acme/pinned") && Catch::Contains("no refs/main and 2 snapshots"));
}

TEST_CASE("a cached repository without its config.json or with a bad ref is refused naming the option", "[unit]") {
  const fs::path cache = test::scratch_dir("trainplan-hf-cache-broken");
  const fs::path repo = cache / "models--acme--weights-only";
  write(repo / "refs" / "main", "abc123\n");
  write(repo / "snapshots" / "abc123" / "model.safetensors", "");
  CHECK_THROWS_WITH(find_hf_cached_config(repo, "--model acme/weights-only"),
                    Catch::Contains("--model acme/weights-only") && Catch::Contains("config.json at revision abc123"));
  write(repo / "refs" / "main", "../../../etc");
  CHECK_THROWS_WITH(find_hf_cached_config(repo, "--model acme/weights-only"), Catch::Contains("does not name a revision"));
}

TEST_CASE("locating --hf-config takes a config.json, a model's folder or a cached repository's folder", "[unit]") {
  const fs::path dir = test::scratch_dir("trainplan-hf-config-dir");
  const fs::path model = dir / "my-model";
  write(model / "config.json", "{}");
  write(model / "model.safetensors", "");
  CHECK(locate_hf_config(model / "config.json") == model / "config.json");
  CHECK(locate_hf_config(model) == model / "config.json");
  const fs::path repo = cached_repo(dir, "models--acme--tiny", "abc123");
  CHECK(locate_hf_config(repo) == repo / "snapshots" / "abc123" / "config.json");
  write(dir / "empty" / "README.md", "");
  CHECK_THROWS_WITH(locate_hf_config(dir / "empty"),
                    Catch::Contains("--hf-config") && Catch::Contains((dir / "empty" / "config.json").string()));
  CHECK_THROWS_WITH(locate_hf_config(dir / "missing"), Catch::Contains("--hf-config") && Catch::Contains("no such file or folder"));
}
