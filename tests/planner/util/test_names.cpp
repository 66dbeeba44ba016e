// The name tables behind every choice users type (planner/util/names.hpp): a name matches whatever its case,
// and an unknown one is refused with the option, the known names and, for a slip, what was meant. The edit
// distances in the comments are counted by hand (Levenshtein: insertions, deletions, substitutions); a name
// is a slip when at most a third of the longer name's letters differ (d * 3 <= longer).
#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "planner/util/input_error.hpp"
#include "planner/util/names.hpp"

using namespace trainplan;

namespace {

enum class colour { red, green, light_blue };
constexpr named<colour> colour_names[] = {{colour::red, "red"}, {colour::green, "green"}, {colour::light_blue, "light-blue"}};

colour parse_colour(std::string_view text) { return parse_named(colour_names, text, "--colour", "colour"); }

const std::vector<std::string_view> colours = {"red", "green", "light-blue"};

}  // namespace

TEST_CASE("names: a name matches in any case, and only as a whole", "[names]") {
  CHECK(parse_colour("red") == colour::red);
  CHECK(parse_colour("GREEN") == colour::green);
  CHECK(parse_colour("Light-Blue") == colour::light_blue);
  // A prefix, a name with a space, or an empty text is no name.
  for (const char* not_a_name : {"re", "red ", " red", "", "light_blue"}) {
    INFO(not_a_name);
    CHECK_THROWS_AS(parse_colour(not_a_name), input_error);
  }
  CHECK(same_name("H100", "h100"));
  CHECK_FALSE(same_name("h100", "h1000"));
  CHECK_FALSE(same_name("h100", "h10"));
}

TEST_CASE("names: each value's name comes from its table, in the table's order", "[names]") {
  CHECK(name_of(colour_names, colour::light_blue) == "light-blue");
  CHECK(name_of(colour_names, static_cast<colour>(7)) == "?");  // a value the table does not list
  CHECK(names_of(colour_names) == colours);
  CHECK(joined_names(colours) == "red, green, light-blue");
  CHECK(joined_names(colours, " | ") == "red | green | light-blue");
  CHECK(joined_names({}) == "");
}

TEST_CASE("names: an unknown name lists the known ones and says which was probably meant", "[names]") {
  // "gren" -> "green": one insertion, d = 1, and 3 <= 5 letters; "red" is d = 2 (6 > 4): green.
  CHECK_THROWS_WITH(parse_colour("gren"), "--colour: unknown colour 'gren' (known: red, green, light-blue); did you mean 'green'?");
  // Case aside: "GREN" is the same slip.
  CHECK_THROWS_WITH(parse_colour("GREN"), Catch::EndsWith("did you mean 'green'?"));
  // "blue": d = 4 to red (12 > 4), 4 to green (12 > 5), 6 to light-blue (18 > 10), and no name starts with
  // it: another name, not a slip, and nothing is suggested.
  CHECK_THROWS_WITH(parse_colour("blue"), "--colour: unknown colour 'blue' (known: red, green, light-blue)");
}

TEST_CASE("names: the closest name within a third of its letters, the first of equals, or a typed prefix", "[names]") {
  CHECK(closest_name("gren", colours) == "green");
  CHECK(closest_name("red", colours) == "red");  // d = 0
  // The bound is inclusive: "abcdxy" is d = 2 from "abcdef" (6 <= 6), "abcxyz" d = 3 (9 > 6).
  const std::vector<std::string_view> six = {"abcdef"};
  CHECK(closest_name("abcdxy", six) == "abcdef");
  CHECK(closest_name("abcxyz", six).empty());
  // Two names at the same distance (d = 1 each): the first listed.
  const std::vector<std::string_view> twins = {"ab1", "ab2"};
  CHECK(closest_name("ab3", twins) == "ab1");
  // "li" is d = 3 from red (9 > 3), 5 from green, 8 from light-blue: none is a slip, but light-blue starts
  // with it. A single letter is too short to be taken for a prefix.
  CHECK(closest_name("li", colours) == "light-blue");
  CHECK(closest_name("LI", colours) == "light-blue");
  CHECK(closest_name("l", colours).empty());
  // Nothing typed, or more than any name: not compared.
  CHECK(closest_name("", colours).empty());
  CHECK(closest_name(std::string(257, 'r'), colours).empty());
}

TEST_CASE("names: the message names the option and the kind of thing as the caller says them", "[names]") {
  const std::vector<std::string_view> gpus = {"h100", "a100-80gb"};
  // "h10" -> "h100": d = 1 (3 <= 4).
  CHECK(unknown_name_message("--gpu", "GPU", "h10", gpus) == "--gpu: unknown GPU 'h10' (known: h100, a100-80gb); did you mean 'h100'?");
  CHECK(unknown_name_message("data/gpus.json: gpu", "GPU", "tpu", gpus) == "data/gpus.json: gpu: unknown GPU 'tpu' (known: h100, a100-80gb)");
}
