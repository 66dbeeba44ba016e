#pragma once
// The one way the planner and `plan` read a file a user names (--hf-config, --data-dir files, reports,
// calibration files): only regular files (a FIFO would block forever, /dev/zero never ends), at most
// 64 MiB, and every failure an input_error naming the file.
#include <filesystem>
#include <string>
#include <string_view>

namespace trainplan {

constexpr std::uintmax_t max_input_file_bytes = 64ull << 20;

std::string read_text_file(const std::filesystem::path& path);  // throws input_error

}  // namespace trainplan
