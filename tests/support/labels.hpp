#pragma once
// ctest's labels come from the Catch2 tags (tests/CMakeLists.txt): a case tagged [cli] runs the `plan` binary
// (label cli), one tagged [measured] reads the committed measurements (data/measurements/, tests/data/
// measurements/ or reports/; label measured), every other case is a unit test (label unit, what `bash
// scripts/test.sh --fast` runs). The helpers that run plan or open a measurement call require_tag, so that a case
// missing its tag fails and says which, rather than slipping into the fast set unnoticed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

namespace trainplan::test {

// Whether the running test case carries [tag] (Catch2 keeps each case's tags lower-cased, without brackets).
inline bool running_case_has_tag(const std::string& tag) {
  const std::string name = Catch::getResultCapture().getCurrentTestName();
  for (const Catch::TestCase& c : Catch::getRegistryHub().getTestCaseRegistry().getAllTests())
    if (c.name == name) return std::find(c.lcaseTags.begin(), c.lcaseTags.end(), tag) != c.lcaseTags.end();
  return false;
}

// Fails the running case unless it carries [tag]; `what` says what the case does that needs the tag.
inline void require_tag(const std::string& tag, const std::string& what) {
  if (!running_case_has_tag(tag))
    FAIL("this test case " << what << " but is not tagged [" << tag << "], which gives it ctest's " << tag
                           << " label (tests/CMakeLists.txt): add the tag");
}

}  // namespace trainplan::test
