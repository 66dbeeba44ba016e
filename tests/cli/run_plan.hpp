#pragma once
// Runs the built `plan` binary with arguments and captures its exit code, stdout and stderr.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include "tests/support/labels.hpp"
#include "tests/support/scratch_dir.hpp"

namespace trainplan::test {

struct plan_run {
  int exit_code = -1;
  std::string out, err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline plan_run run_plan(const std::string& args) {
  require_tag("cli", "runs the plan binary");
  static int counter = 0;
  static const std::filesystem::path dir = scratch_dir("trainplan-cli-test");
  const auto out = dir / ("out" + std::to_string(counter));
  const auto err = dir / ("err" + std::to_string(counter++));
  const std::string cmd = std::string(TRAINPLAN_PLAN_BINARY) + " " + args + " >" + out.string() + " 2>" + err.string() +
                          " </dev/null";
  const int status = std::system(cmd.c_str());
  plan_run r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  // scripts/test.sh --sanitize: g++'s UBSan prints to stderr whatever log_path says; keep a report of this
  // plan where the script looks for reports.
  if (const char* logs = std::getenv("TRAINPLAN_SANITIZER_LOGS"))
    if (r.err.find("runtime error:") != std::string::npos || r.err.find("Sanitizer") != std::string::npos)
      std::ofstream(std::filesystem::path(logs) / ("plan-stderr." + std::to_string(::getpid()) + "." + std::to_string(counter)))
          << "plan " << args << "\n" << r.err;
  return r;
}

// A file of tests/data.
inline std::string fixture(const std::string& name) { return std::string(TRAINPLAN_TEST_DATA) + "/" + name; }

// Exactly one non-empty line, as every error message must be.
inline bool one_line(const std::string& s) { return !s.empty() && std::count(s.begin(), s.end(), '\n') == 1; }

// Splits one CSV line into fields (RFC 4180 quotes).
inline std::vector<std::string> csv_split(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') out.back() += '"', ++i;
      else if (c == '"') quoted = false;
      else out.back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

// The report's text with its wrapped lines joined again: a line break and the indent after it, or a shell
// command's " \\" continuation, become one space, so that a phrase the report wrapped can be looked for whole.
inline std::string flowed(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const bool continuation = text.compare(i, 3, " \\\n") == 0;
    if (continuation || (text[i] == '\n' && i + 1 < text.size() && text[i + 1] == ' ')) {
      i += continuation ? 3 : 1;
      while (i < text.size() && text[i] == ' ') ++i;
      out += ' ';
      --i;
      continue;
    }
    out += text[i];
  }
  return out;
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) out.push_back(line);
  return out;
}

}  // namespace trainplan::test
