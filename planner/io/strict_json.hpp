#pragma once
// Reading the data files strictly: a document that is not JSON, a missing key, a key of the wrong type and a key
// nobody reads are each an input_error naming the file and the key (keys starting with '_' are comments).
#include <fmt/format.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

#include "planner/util/input_error.hpp"

namespace trainplan {

inline nlohmann::json parse_document(std::string_view text, const std::string& file) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // syntax errors, and numbers out of range such as 1e400
    throw input_error(fmt::format("{}: not valid JSON ({})", file, e.what()));
  }
}

// Strict object reader: every key read must exist with the right type, and keys nobody reads are errors.
class strict_object {
 public:
  strict_object(const nlohmann::json& j, std::string where) : j_(j), where_(std::move(where)) {
    if (!j_.is_object()) throw input_error(fmt::format("{}: expected a JSON object", where_));
  }
  const nlohmann::json& at(const std::string& key) {
    seen_.insert(key);
    auto it = j_.find(key);
    if (it == j_.end()) throw input_error(fmt::format("{}: missing key '{}'", where_, key));
    return *it;
  }
  bool has(const std::string& key) const { return j_.contains(key); }
  std::string string(const std::string& key) {
    const nlohmann::json& v = at(key);
    if (!v.is_string()) throw type_error(key, "a string");
    return v.get<std::string>();
  }
  std::uint64_t uint(const std::string& key) {
    const nlohmann::json& v = at(key);
    if (!v.is_number_unsigned()) throw type_error(key, "a non-negative integer");
    return v.get<std::uint64_t>();
  }
  double number(const std::string& key) {
    const nlohmann::json& v = at(key);
    if (!v.is_number()) throw type_error(key, "a number");
    return v.get<double>();
  }
  bool boolean(const std::string& key) {
    const nlohmann::json& v = at(key);
    if (!v.is_boolean()) throw type_error(key, "true or false");
    return v.get<bool>();
  }
  void finish() const {
    for (auto it = j_.begin(); it != j_.end(); ++it)
      if (!seen_.count(it.key()) && !it.key().starts_with("_"))
        throw input_error(fmt::format("{}: unknown key '{}'", where_, it.key()));
  }
  const std::string& where() const { return where_; }

 private:
  input_error type_error(const std::string& key, const char* expected) const {
    return input_error(fmt::format("{}: key '{}' must be {}", where_, key, expected));
  }
  const nlohmann::json& j_;
  std::string where_;
  std::set<std::string> seen_;
};

}  // namespace trainplan
