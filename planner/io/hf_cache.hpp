#pragma once
// Where a model's config.json lies on this machine: a model's folder (as save_pretrained writes it or a download
// leaves it), or the local Hugging Face hub cache. Reading the config is hf_config.hpp's job.
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainplan {

// --hf-config PATH: the file itself; a folder's config.json; or, for a repository's folder of the hub cache
// (models--org--name), its config.json at the revision refs/main names. Throws input_error naming --hf-config
// and what was looked for.
std::filesystem::path locate_hf_config(const std::filesystem::path& given);

// An environment variable's value, or nullopt when unset or empty (std::getenv, or a test's own table).
using env_lookup = std::function<std::optional<std::string>(const char*)>;
std::optional<std::string> process_env(const char* name);

// The hub cache folder, as huggingface_hub resolves it (constants.py: HF_HUB_CACHE, else HF_HOME/hub, where
// HF_HOME defaults to $XDG_CACHE_HOME/huggingface, and XDG_CACHE_HOME to ~/.cache). nullopt when none of
// HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME and HOME is set.
std::optional<std::filesystem::path> hf_hub_cache_dir(const env_lookup& env = process_env);

// Whether `name` can be a repository id of the Hub ("gpt2", "org/name": huggingface_hub's validate_repo_id:
// letters, digits, '-', '_' and '.', at most one '/', no "--" or "..", at most 96 characters), so that
// looking it up in the cache cannot leave the cache folder.
bool is_hf_repo_id(std::string_view name);

// The hub cache's folder for a model repository: <cache>/models--org--name (file_download.py,
// repo_folder_name: the id's '/' become "--").
std::filesystem::path hf_cache_repo_dir(const std::filesystem::path& cache_dir, std::string_view repo_id);

// The model repositories the cache holds, as ids ("org/name"), for "did you mean".
std::vector<std::string> hf_cached_repo_ids(const std::filesystem::path& cache_dir);

struct hf_cached_config {
  std::filesystem::path config_path;  // <repo dir>/snapshots/<revision>/config.json
  std::string revision;               // the commit refs/main names, or the one snapshot there is
};

// The config.json of a cached repository at the revision refs/main names (or, with no refs/main, the one
// snapshot there is). nullopt when the cache has no folder for the repository; throws input_error, naming
// `option`, when it has the folder but no config.json to read.
std::optional<hf_cached_config> find_hf_cached_config(const std::filesystem::path& repo_dir, std::string_view option);

}  // namespace trainplan
