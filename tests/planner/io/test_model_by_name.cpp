// --model NAME (planner/io/model_by_name.hpp): a preset first, then the local Hugging Face cache (a made-up cache
// folder holding GPT-2's published config.json), and the refusal of a name neither holds.
#include <catch2/catch.hpp>

#include <fstream>

#include "planner/io/model_by_name.hpp"
#include "planner/model/param_count.hpp"
#include "planner/util/input_error.hpp"
#include "tests/support/scratch_dir.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
namespace fs = std::filesystem;

namespace {
const catalog& data() {
  static const catalog c = catalog::load();
  return c;
}
env_lookup cache_at(const fs::path& dir) {
  return [dir](const char* name) -> std::optional<std::string> {
    if (std::string(name) == "HF_HUB_CACHE") return dir.string();
    return std::nullopt;
  };
}
}  // namespace

TEST_CASE("a preset is found by name before the cache is looked in", "[unit]") {
  const named_model m = model_by_name(data(), "llama-3.1-8b", cache_at("/nonexistent"));
  CHECK(m.spec.name == "llama-3.1-8b");
  CHECK(m.note.empty());
}

TEST_CASE("a repository in the Hugging Face cache is read from its config.json", "[unit]") {
  const fs::path cache = test::scratch_dir("trainplan-model-by-name");
  const fs::path snapshot = cache / "models--someone--my-gpt2" / "snapshots" / "e7da7f221d5bf496a48136c0cd264e630fe9fcc8";
  fs::create_directories(snapshot);
  fs::copy_file(test::hf_fixture("gpt2.json"), snapshot / "config.json");
  fs::create_directories(cache / "models--someone--my-gpt2" / "refs");
  std::ofstream(cache / "models--someone--my-gpt2" / "refs" / "main") << "e7da7f221d5bf496a48136c0cd264e630fe9fcc8";

  for (const char* given : {"someone/my-gpt2", "https://huggingface.co/someone/my-gpt2/"}) {
    const named_model m = model_by_name(data(), given, cache_at(cache));
    CHECK(m.spec.name == "someone/my-gpt2");
    // GPT-2 small by hand: 50257 x 768 tied embedding + 1024 x 768 positions + 12 layers of 7,087,872 + 1,536
    // for the final norm = 124,439,808.
    CHECK(count_params(m.spec).total == 124'439'808ull);
    CHECK_THAT(m.note, Catch::Contains("snapshots/e7da7f221d5bf496a48136c0cd264e630fe9fcc8/config.json") &&
                           Catch::Contains("Hugging Face cache's " + (cache / "models--someone--my-gpt2").string()));
    CHECK_THAT(m.spec.source, Catch::Contains((snapshot / "config.json").string()));
  }
}

TEST_CASE("a name neither the catalog nor the cache holds gets the closest of both", "[unit]") {
  const fs::path cache = test::scratch_dir("trainplan-model-by-name-unknown");
  fs::create_directories(cache / "models--someone--my-gpt2" / "snapshots");
  CHECK_THROWS_WITH(model_by_name(data(), "someone/my-gtp2", cache_at(cache)),
                    Catch::Contains("unknown model 'someone/my-gtp2'") &&
                        Catch::Contains((cache / "models--someone--my-gtp2").string()) &&
                        Catch::Contains("did you mean 'someone/my-gpt2'"));
  CHECK_THROWS_WITH(model_by_name(data(), "llama-3.1-8bb", cache_at(cache)), Catch::Contains("did you mean 'llama-3.1-8b'"));
  CHECK_THROWS_WITH(model_by_name(data(), "../../etc/passwd", cache_at(cache)),
                    Catch::Contains("unknown model") && !Catch::Contains("cache"));
}
