#pragma once
// The one way the planner and `plan` read a file a user names (--hf-config, --data-dir files, reports,
// calibration files): only regular files (a FIFO would block forever, /dev/zero never ends), at most
// 64 MiB, and every failure an input_error naming the file.
#include <filesystem>
#include <string>
#include <string_view>

namespace trainplan {

constexpr std::uintmax_t max_input_file_bytes = 64ull << 20;

// How the command uses what it reads: an input (which no output of the same command may replace: `plan
// check r.jsonl --segments-out r.jsonl` once destroyed a GPU measurement), or a file it updates in place
// (`plan calibrate -o calibration.json` merges into the file it writes).
enum class file_use { input, updated };

std::string read_text_file(const std::filesystem::path& path, file_use use = file_use::input);  // throws input_error

// Whether `path` is (by device and inode: links and other names included) a file this process read as an input
// and does not update.
bool is_input_file(const std::filesystem::path& path);

}  // namespace trainplan
