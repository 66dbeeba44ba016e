// --model NAME resolved (model_by_name.hpp): the catalog first, then the Hugging Face hub cache.
#include "planner/io/model_by_name.hpp"

#include <fmt/format.h>

#include <cctype>
#include <optional>

#include "planner/io/hf_config.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {

namespace {

// A repository id as given, its case kept (the cache's folder names keep it), without the page's URL around
// it: https://huggingface.co/org/name/ -> org/name.
std::string repo_id_of(std::string_view name) {
  auto strip = [&name](std::string_view prefix) {
    if (name.size() < prefix.size()) return;
    for (std::size_t i = 0; i < prefix.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(name[i])) != prefix[i]) return;
    name.remove_prefix(prefix.size());
  };
  for (const std::string_view prefix : {"https://", "http://"}) strip(prefix);
  for (const std::string_view host : {"huggingface.co/", "hf.co/"}) strip(host);
  while (name.size() > 1 && name.back() == '/') name.remove_suffix(1);
  return std::string(name);
}

}  // namespace

named_model model_by_name(const catalog& data, std::string_view name, const env_lookup& env) {
  if (const model_preset* preset = data.find_model(name)) return {preset->spec, {}};
  const std::string id = repo_id_of(name);
  const std::optional<std::filesystem::path> cache = hf_hub_cache_dir(env);
  if (!is_hf_repo_id(id) || !cache) throw input_error(data.unknown_model_message(name));
  const std::filesystem::path repo_dir = hf_cache_repo_dir(*cache, id);
  const std::optional<hf_cached_config> cached = find_hf_cached_config(repo_dir, fmt::format("--model {}", id));
  if (!cached)
    throw input_error(data.unknown_model_message(
        name, fmt::format("not in the Hugging Face cache either (no {})", repo_dir.string()), hf_cached_repo_ids(*cache)));
  named_model m{model_from_hf_config(cached->config_path), {}};
  m.spec.name = id;  // the repository, as the user named it; the file read is the source and the note
  // The file as two words, each short enough for a report line (a word longer than a line would be cut):
  // <repo dir>/snapshots/<revision>/config.json. The model's source carries the whole path.
  m.note = fmt::format("--model {}: not a preset; read {} of the Hugging Face cache's {}", id,
                       cached->config_path.lexically_relative(repo_dir).string(), repo_dir.string());
  return m;
}

}  // namespace trainplan
