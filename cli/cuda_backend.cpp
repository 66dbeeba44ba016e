// Finds the CUDA backend (cuda_backend.hpp): libtrainplan_cuda_backend.so beside the executable, opened with
// dlopen once, or the reason there is none, kept for every later call.
#include "cli/cuda_backend.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <filesystem>

#include "planner/util/input_error.hpp"

namespace trainplan::cli {

const kernels::cuda::backend_api& cuda_backend(const char* option) {
  static const kernels::cuda::backend_api* api = nullptr;
  static std::string why;
  if (!api && why.empty()) {
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    const std::filesystem::path plugin = (ec ? std::filesystem::path(".") : self.parent_path()) / "libtrainplan_cuda_backend.so";
    if (!std::filesystem::exists(plugin, ec)) {
      why = "this build has no CUDA backend (nvcc was not found when it was configured)";
    } else if (void* handle = dlopen(plugin.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      using entry_fn = const kernels::cuda::backend_api* (*)();
      if (auto entry = reinterpret_cast<entry_fn>(dlsym(handle, "trainplan_cuda_backend_v1"))) api = entry();
      else why = fmt::format("{} has no trainplan_cuda_backend_v1", plugin.string());
    } else {
      const char* err = dlerror();
      why = fmt::format("cannot load the CUDA backend: {}", err ? err : plugin.string());
    }
  }
  if (!api) throw input_error(fmt::format("{}: {}", option, why));
  const std::string reason = api->unavailable_reason();
  if (!reason.empty()) throw input_error(fmt::format("{}: {}", option, reason));
  return *api;
}

}  // namespace trainplan::cli
