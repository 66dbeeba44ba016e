#pragma once
// What every fuzz target shares: a parser's only way to refuse an input is trainplan::input_error; any
// other exception, and any broken promise about a result it returned, is a finding. A finding aborts, which
// libFuzzer records as a crash (the input goes to build-fuzz/findings/).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>

#include "planner/util/input_error.hpp"

namespace trainplan::fuzz {

[[noreturn]] inline void finding(std::string_view what) {
  std::fprintf(stderr, "FUZZ FINDING: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

inline void require(bool ok, std::string_view what) {
  if (!ok) finding(what);
}

// Runs f(); returns true when it returned, false when it threw input_error, aborts on anything else.
template <typename F>
bool returns_or_input_error(F&& f) {
  try {
    f();
    return true;
  } catch (const input_error&) {
    return false;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FUZZ FINDING: exception other than input_error: %s\n", e.what());
    std::abort();
  } catch (...) {
    finding("a non-std exception");
  }
}

}  // namespace trainplan::fuzz
