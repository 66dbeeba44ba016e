#include "planner/run_config.hpp"

#include <fmt/format.h>

#include "planner/input_error.hpp"

namespace trainplan {

std::string_view recompute_name(recompute_mode r) {
  switch (r) {
    case recompute_mode::none: return "none";
    case recompute_mode::selective: return "selective";
    case recompute_mode::full: return "full";
  }
  return "?";
}

recompute_mode parse_recompute(std::string_view text) {
  if (text == "none") return recompute_mode::none;
  if (text == "selective") return recompute_mode::selective;
  if (text == "full") return recompute_mode::full;
  throw input_error(fmt::format("--recompute: unknown mode '{}' (known: none, selective, full)", text));
}

std::string_view attention_name(attention_kind a) { return a == attention_kind::eager ? "eager" : "flash"; }

attention_kind parse_attention(std::string_view text) {
  if (text == "eager") return attention_kind::eager;
  if (text == "flash") return attention_kind::flash;
  throw input_error(fmt::format("--attention: unknown kind '{}' (known: eager, flash)", text));
}

}  // namespace trainplan
