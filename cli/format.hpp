#pragma once
// Number formatting for people: binary GiB with the unit written, grouped integers, durations.
#include <cstdint>
#include <string>

namespace trainplan::cli {

std::string gib(std::uint64_t bytes);           // "12.55 GiB"
std::string gib_signed(std::int64_t bytes);     // "-3.20 GiB"
std::string grouped(std::uint64_t n);           // "6,738,415,616"
std::string grouped_rate(double per_second);    // tokens/s rounded to the nearest whole, grouped: 15,593
std::string percent(double fraction);           // "41.3%"
std::string duration(double seconds);           // "0.412 s", "3.2 h", "41.0 days"
std::string scientific(double x);               // "1.73e+14"

// The current UTC time in strftime's `format`: report names and folders.
std::string utc_now(const char* strftime_format);
std::string today();                            // "2026-11-23", UTC: the date in reports/<gpu>-<date>/

}  // namespace trainplan::cli
