// `plan gpus` and `plan models`: the GPUs and model presets of the data catalog (data/gpus.json, data/models.json,
// or a --data-dir's), one row each.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.hpp"
#include "cli/format.hpp"
#include "cli/model_features.hpp"
#include "planner/io/catalog.hpp"
#include "planner/model/param_count.hpp"

namespace trainplan::cli {

void register_list_commands(CLI::App& app, command_action& chosen) {
  auto data_dir = std::make_shared<std::string>();
  auto load = [data_dir]() {
    return catalog::load(data_dir->empty() ? std::nullopt : std::optional<std::filesystem::path>(*data_dir));
  };

  CLI::App* gpus = app.add_subcommand("gpus", "list the GPUs in data/gpus.json");
  gpus->add_option("--data-dir", *data_dir, "folder whose gpus.json replaces the built-in one");
  gpus->callback([&chosen, load]() {
    chosen = [load]() {
      catalog c = load();
      fmt::print("{:<11} {:<34} {:>11} {:>9} {:>9} {:>9} {:>9}\n", "name", "description", "memory", "bf16", "fp16",
                 "fp8", "TB/s");
      auto tf = [](const gpu_spec& g, dtype t) {
        auto p = g.peak_flops_per_s(t);
        return p ? fmt::format("{:.0f}", *p / 1e12) : std::string("-");
      };
      for (const gpu_spec& g : c.gpus())
        fmt::print("{:<11} {:<34} {:>11} {:>9} {:>9} {:>9} {:>9.2f}\n", g.name, g.description, gib(g.memory_bytes),
                   tf(g, dtype::bf16), tf(g, dtype::fp16), tf(g, dtype::fp8), g.memory_bandwidth_bytes_per_s / 1e12);
      fmt::print("peak TFLOP/s are dense tensor-core figures; sources are in data/gpus.json\n");
      return 0;
    };
  });

  CLI::App* models = app.add_subcommand("models", "list the model presets in data/models.json");
  models->add_option("--data-dir", *data_dir, "folder whose models.json replaces the built-in one");
  models->callback([&chosen, load]() {
    chosen = [load]() {
      catalog c = load();
      fmt::print("{:<16} {:<6} {:>6} {:>7} {:>6} {:>9} {:>7} {:>8} {:>16}  {:<48}  {}\n", "name", "family", "layers", "hidden",
                 "heads", "kv_heads", "ffn", "vocab", "params", "Hugging Face repository (--model takes it too)",
                 "beyond the family");
      for (const model_preset& p : c.models()) {
        const model_spec& m = p.spec;
        const std::string features = model_features_text(m);
        fmt::print("{:<16} {:<6} {:>6} {:>7} {:>6} {:>9} {:>7} {:>8} {:>16}  {:<48}{}\n", m.name, family_name(m.family), m.layers,
                   m.hidden, m.heads, m.kv_heads, m.ffn, m.vocab, grouped(count_params(m).total),
                   p.hf_repo.empty() ? "-" : p.hf_repo, features.empty() ? "" : "  " + features);
      }
      return 0;
    };
  });
}

}  // namespace trainplan::cli
