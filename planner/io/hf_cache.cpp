// Finding a model's config.json on this machine (hf_cache.hpp): the layout is huggingface_hub's
// (file_download.py, try_to_load_from_cache; the Hub's "local cache" reference), read, never written.
#include "planner/io/hf_cache.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>
#include <system_error>
#include <vector>

#include "planner/util/input_error.hpp"
#include "planner/util/text_file.hpp"

namespace trainplan {

namespace fs = std::filesystem;

namespace {

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

bool present(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

// "~/x" with the home folder, as Python's os.path.expanduser does for HF_HOME and the default.
fs::path expand_home(const std::string& value, const env_lookup& env) {
  if (value == "~" || value.starts_with("~/")) {
    if (const std::optional<std::string> home = env("HOME")) return fs::path(*home) / value.substr(value.size() > 1 ? 2 : 1);
  }
  return fs::path(value);
}

// A revision as refs/ holds it: one path component (a commit hash in practice), so that it names a snapshot
// folder and nothing outside it.
bool is_revision_name(const std::string& rev) {
  if (rev.empty() || rev == "." || rev == ".." || rev.size() > 255) return false;
  for (const char c : rev)
    if (c == '/' || c == '\\' || std::iscntrl(static_cast<unsigned char>(c))) return false;
  return true;
}

std::string trimmed(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

}  // namespace

std::optional<std::string> process_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::optional<fs::path> hf_hub_cache_dir(const env_lookup& env) {
  // huggingface_hub constants.py: HF_HUB_CACHE (or its older name HUGGINGFACE_HUB_CACHE), else HF_HOME/hub with
  // HF_HOME defaulting to $XDG_CACHE_HOME/huggingface and XDG_CACHE_HOME to ~/.cache; "~" expanded.
  for (const char* name : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"})
    if (const std::optional<std::string> v = env(name)) return expand_home(*v, env);
  if (const std::optional<std::string> home = env("HF_HOME")) return expand_home(*home, env) / "hub";
  if (const std::optional<std::string> xdg = env("XDG_CACHE_HOME")) return expand_home(*xdg, env) / "huggingface" / "hub";
  if (const std::optional<std::string> user = env("HOME")) return fs::path(*user) / ".cache" / "huggingface" / "hub";
  return std::nullopt;
}

bool is_hf_repo_id(std::string_view name) {
  // huggingface_hub utils/_validators.py, validate_repo_id: [\w\-.]{1,96} per part, at most one '/', no "--" or
  // "..", not starting or ending with '-' or '.'.
  if (name.empty() || name.size() > 96) return false;
  if (name.find("--") != std::string_view::npos || name.find("..") != std::string_view::npos) return false;
  int slashes = 0;
  for (const char c : name) {
    if (c == '/') ++slashes;
    else if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
  }
  if (slashes > 1) return false;
  const std::size_t slash = name.find('/');
  for (std::string_view part : {name.substr(0, slash), slash == std::string_view::npos ? std::string_view("x") : name.substr(slash + 1)}) {
    if (part.empty()) return false;
    for (const char edge : {part.front(), part.back()})
      if (edge == '-' || edge == '.') return false;
  }
  return true;
}

fs::path hf_cache_repo_dir(const fs::path& cache_dir, std::string_view repo_id) {
  // file_download.py, repo_folder_name: "models" + "--" + the id's parts joined by "--".
  std::string folder = "models--";
  for (const char c : repo_id) folder += c == '/' ? std::string("--") : std::string(1, c);
  return cache_dir / folder;
}

std::vector<std::string> hf_cached_repo_ids(const fs::path& cache_dir) {
  std::vector<std::string> ids;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(cache_dir, ec)) {
    const std::string folder = e.path().filename().string();
    if (!folder.starts_with("models--") || !e.is_directory(ec)) continue;
    const std::string_view rest = std::string_view(folder).substr(8);  // repo_folder_name inverted: the first
    const std::size_t sep = rest.find("--");                             // "--" stands for the '/'
    ids.push_back(sep == std::string_view::npos ? std::string(rest)
                                                : fmt::format("{}/{}", rest.substr(0, sep), rest.substr(sep + 2)));
    if (ids.size() >= 10'000) break;  // a did-you-mean list, not an inventory
  }
  return ids;
}

std::optional<hf_cached_config> find_hf_cached_config(const fs::path& repo_dir, std::string_view option) {
  if (!is_dir(repo_dir)) return std::nullopt;
  const fs::path snapshots = repo_dir / "snapshots";
  hf_cached_config found;
  const fs::path ref = repo_dir / "refs" / "main";
  if (present(ref)) {
    // refs/main holds the commit the branch pointed at when the files were downloaded (try_to_load_from_cache
    // reads the revision from refs/<revision> when that file exists).
    found.revision = trimmed(read_text_file(ref));
    if (!is_revision_name(found.revision))
      throw input_error(fmt::format("{}: {} does not name a revision (expected a commit hash)", option, ref.string()));
  } else {
    // Downloaded at a pinned commit (no branch to record): the snapshot, when there is exactly one.
    std::vector<std::string> revisions;
    std::error_code ec;
    if (is_dir(snapshots))
      for (const fs::directory_entry& e : fs::directory_iterator(snapshots, ec))
        if (e.is_directory(ec)) revisions.push_back(e.path().filename().string());
    if (revisions.size() != 1)
      throw input_error(fmt::format("{}: {} has no refs/main and {} snapshots: give one with --hf-config {}/<revision>",
                                    option, repo_dir.string(), revisions.size(), snapshots.string()));
    found.revision = revisions.front();
  }
  found.config_path = snapshots / found.revision / "config.json";
  if (!present(found.config_path))
    throw input_error(fmt::format("{}: the Hugging Face cache holds {} but not its config.json at revision {} (looked for {})",
                                  option, repo_dir.string(), found.revision, found.config_path.string()));
  return found;
}

fs::path locate_hf_config(const fs::path& given) {
  const std::string name = given.string();
  if (!present(given))
    throw input_error(fmt::format("--hf-config {}: no such file or folder (give a config.json, or a model's folder that holds one)", name));
  if (!is_dir(given)) return given;  // read_text_file refuses what is not a regular file
  // A model's folder: save_pretrained writes config.json beside the weights (transformers, CONFIG_NAME).
  if (present(given / "config.json")) return given / "config.json";
  // A repository's folder of the hub cache (models--org--name): its snapshot at refs/main.
  if (is_dir(given / "snapshots"))
    if (const std::optional<hf_cached_config> cached = find_hf_cached_config(given, "--hf-config")) return cached->config_path;
  throw input_error(fmt::format("--hf-config {}: a folder without a config.json (looked for {}, and for a Hugging Face "
                                "cache folder's snapshots/)", name, (given / "config.json").string()));
}

}  // namespace trainplan
