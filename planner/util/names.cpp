// Name tables (names.hpp): case-blind matching, the closest known name by edit distance (Wagner and Fischer
// 1974), and the message for an unknown one.
#include "planner/util/names.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace trainplan {
namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// Levenshtein distance, case aside: insertions, deletions and substitutions (Wagner and Fischer 1974).
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

std::string_view closest_name(std::string_view given, std::span<const std::string_view> known) {
  if (given.empty() || given.size() > 256) return {};  // nothing typed, or no name: not worth comparing
  std::string_view best;
  std::size_t best_distance = 0;
  for (std::string_view name : known) {
    const std::size_t d = edit_distance(given, name);
    const std::size_t longer = std::max(given.size(), name.size());
    if (d * 3 > longer) continue;  // more than a third differs: another name, not a slip
    if (best.empty() || d < best_distance) best = name, best_distance = d;
  }
  // A typed prefix of a longer name ("llama-3-8b" for "llama-3.1-8b" is not one; "h10" for "h100" is).
  if (best.empty())
    for (std::string_view name : known)
      if (given.size() >= 2 && name.size() > given.size() && same_name(name.substr(0, given.size()), given)) return name;
  return best;
}

std::string joined_names(std::span<const std::string_view> names, std::string_view separator) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += separator;
    out += n;
  }
  return out;
}

std::string unknown_name_message(std::string_view option, std::string_view what, std::string_view given,
                                 std::span<const std::string_view> known) {
  std::string message = fmt::format("{}: unknown {} '{}' (known: {})", option, what, given, joined_names(known));
  if (const std::string_view close = closest_name(given, known); !close.empty())
    message += fmt::format("; did you mean '{}'?", close);
  return message;
}

}  // namespace trainplan
