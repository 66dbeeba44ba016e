#pragma once
// Names users type for the planner's choices (enums, GPUs, models, stacks): one table per choice gives each
// value its name, and from it the parser, the name and the "(known: ...)" list of an error come. A name matches
// whatever its case; an unknown one is refused naming the option, the known names and, when one is close, what
// was probably meant.
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "planner/util/input_error.hpp"

namespace trainplan {

template <typename E>
struct named {
  E value;
  std::string_view name;
};

// Whether two names are the same, whatever their case.
bool same_name(std::string_view a, std::string_view b);
// The known name closest to `given` by edit distance (case aside), when it is close enough to be a slip: at
// most a third of the longer name's letters differ. Empty when none is.
std::string_view closest_name(std::string_view given, std::span<const std::string_view> known);
// "--precision: unknown precision 'fp16' (known: fp32, bf16-mixed, ...); did you mean 'fp16-mixed'?"
std::string unknown_name_message(std::string_view option, std::string_view what, std::string_view given,
                                 std::span<const std::string_view> known);
// "a, b, c"
std::string joined_names(std::span<const std::string_view> names, std::string_view separator = ", ");

template <typename E, std::size_t N>
constexpr std::string_view name_of(const named<E> (&table)[N], E value) {
  for (const named<E>& n : table)
    if (n.value == value) return n.name;
  return "?";
}

template <typename E, std::size_t N>
std::vector<std::string_view> names_of(const named<E> (&table)[N]) {
  std::vector<std::string_view> out;
  for (const named<E>& n : table) out.push_back(n.name);
  return out;
}

// The value named `text` (any case); throws input_error naming `option` and `what` otherwise.
template <typename E, std::size_t N>
E parse_named(const named<E> (&table)[N], std::string_view text, std::string_view option, std::string_view what) {
  for (const named<E>& n : table)
    if (same_name(n.name, text)) return n.value;
  const std::vector<std::string_view> known = names_of(table);
  throw input_error(unknown_name_message(option, what, text, known));
}

}  // namespace trainplan
