// The registry of training stacks (planner/profiles/registry.hpp): one registration per stack, each in its
// own folder under planner/profiles/ (docs/architecture.md: adding a stack adds its folder and its line), found
// by name whatever its case, with the known names and a suggestion when a name is a slip (planner/util/names.hpp:
// a slip when the edit distance d is at most a third of the longer name, d * 3 <= longer).
#include <catch2/catch.hpp>

#include <cctype>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "planner/profiles/registry.hpp"
#include "planner/util/input_error.hpp"

using namespace trainplan;

namespace {

std::vector<std::string> split(const std::string& text, const std::string& separator) {
  std::vector<std::string> out;
  for (std::size_t start = 0;;) {
    const std::size_t end = text.find(separator, start);
    out.push_back(text.substr(start, end - start));
    if (end == std::string::npos) return out;
    start = end + separator.size();
  }
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

TEST_CASE("registry: every folder under planner/profiles/ is one registered profile of its name, and no other is", "[profiles][registry]") {
  // The folders, each with its <name>_profile.cpp, are the source of truth a reader sees.
  std::set<std::string> folders;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(TRAINPLAN_SOURCE_DIR) / "planner" / "profiles"))
    if (entry.is_directory()) {
      const std::string name = entry.path().filename().string();
      INFO(name);
      CHECK(std::filesystem::exists(entry.path() / (name + "_profile.cpp")));
      folders.insert(name);
    }
  std::set<std::string> registered, registered_lower;
  for (const stack_profile* p : all_profiles()) {
    INFO(p->name);
    CHECK(registered.insert(std::string(p->name)).second);  // no name twice
    CHECK(registered_lower.insert(upper(p->name)).second);  // nor twice whatever its case
    CHECK_FALSE(p->title.empty());
    CHECK(p->build_inventory != nullptr);
    CHECK(p->check != nullptr);
  }
  CHECK(registered == folders);
  CHECK(folders.size() == 7);  // hf, fsdp2, deepspeed, torchtune, llmc, megatron, trainplan
}

TEST_CASE("registry: profile_names lists every registered profile once, in the registration order", "[profiles][registry]") {
  std::vector<std::string> expected;
  for (const stack_profile* p : all_profiles()) expected.emplace_back(p->name);
  CHECK(split(profile_names(), " | ") == expected);
  CHECK(split(profile_names(", "), ", ") == expected);
  CHECK(profile_names() == "hf | fsdp2 | deepspeed | torchtune | llmc | megatron | trainplan");
}

TEST_CASE("registry: a profile is found by its name in any case", "[profiles][registry]") {
  for (const stack_profile* p : all_profiles()) {
    INFO(p->name);
    CHECK(&profile_named(p->name) == p);
    CHECK(&profile_named(upper(p->name)) == p);
  }
  CHECK(profile_named("Megatron").name == "megatron");
}

TEST_CASE("registry: an unknown profile names the option, the known profiles and the one probably meant", "[profiles][registry][errors]") {
  // "hff": d = 1 from hf (3 <= 3).
  CHECK_THROWS_WITH(profile_named("hff"),
                    "--framework: unknown framework 'hff' (known: hf, fsdp2, deepspeed, torchtune, llmc, megatron, trainplan); did you mean 'hf'?");
  // "megatorn": a transposition, d = 2 from megatron (6 <= 8).
  CHECK_THROWS_WITH(profile_named("megatorn"), Catch::EndsWith("did you mean 'megatron'?"));
  // "llm": d = 1 from llmc (3 <= 4), and 3 from hf (9 > 3).
  CHECK_THROWS_WITH(profile_named("llm"), Catch::EndsWith("did you mean 'llmc'?"));
  // "colossalai": d >= 8 from every name (more than a third of its 10 letters), and none starts with it: no
  // suggestion.
  CHECK_THROWS_WITH(profile_named("colossalai"),
                    "--framework: unknown framework 'colossalai' (known: hf, fsdp2, deepspeed, torchtune, llmc, megatron, trainplan)");
  // The caller's option: a calibration file's key, a report's env line.
  CHECK_THROWS_WITH(profile_named("fsdp", "calibration.json: profiles"), Catch::StartsWith("calibration.json: profiles: unknown framework 'fsdp'"));
  CHECK_THROWS_AS(profile_named(""), input_error);
}

TEST_CASE("registry: the defaults: the harness for code, Hugging Face for the command line, Megatron for expert parallelism", "[profiles][registry]") {
  CHECK(harness_profile().name == "trainplan");
  CHECK(default_cli_profile().name == "hf");
  CHECK(default_cli_profile(true).name == "megatron");
  CHECK(unlabelled_report_profile().name == "hf");
  run_config r;
  CHECK(&profile_of(r) == &harness_profile());
  r.profile = &profile_named("llmc");
  CHECK(&profile_of(r) == &profile_named("llmc"));
}
