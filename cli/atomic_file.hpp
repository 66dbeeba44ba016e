#pragma once
// Writing an output file whole or not at all: the content goes to FILE.partial, which replaces FILE only
// once written and flushed, so a failure never leaves a truncated file where a good one was.
#include <filesystem>
#include <string>

namespace trainplan::cli {

// Creates missing parent folders. Throws input_error naming the file.
void write_file_atomically(const std::filesystem::path& path, const std::string& content);

}  // namespace trainplan::cli
