#pragma once
// An integer with thousands separators, for messages and reports: 6738415616 -> "6,738,415,616".
#include <cstdint>
#include <string>

namespace trainplan {

inline std::string grouped_count(std::uint64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace trainplan
