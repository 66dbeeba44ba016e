// `plan gpus` and `plan models`: the GPUs and model presets of the data catalog (data/gpus.json, data/models.json,
// or a --data-dir's), one row each.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.hpp"
#include "cli/format.hpp"
#include "cli/model_features.hpp"
#include "planner/io/catalog.hpp"
#include "planner/model/param_count.hpp"
#include "planner/profiles/registry.hpp"

namespace trainplan::cli {
namespace {

// Where each GPU's memory, CUDA context and time constants come from: a table, one row per GPU, the context and time
// per stack that has calibration of its own (the stacks that share another's runtime read its: stack_profile::calibrated_as).
void print_gpu_origins(const catalog& c) {
  std::vector<const stack_profile*> stacks;
  for (const stack_profile* p : all_profiles())
    if (!p->calibrated_as) stacks.push_back(p);
  std::string names, sharing;  // the stacks, "/" between them, and which reads whose
  for (const stack_profile* p : stacks) names += (names.empty() ? "" : "/") + std::string(p->name);
  for (const stack_profile* p : all_profiles())
    if (p->calibrated_as) sharing += fmt::format("{}{} reads {}'s", sharing.empty() ? "" : ", ", p->name, calibration_name(*p));
  auto cells = [&](const calibration& cal, calibration_origin (calibration::*origin)(std::string_view) const) {
    std::string out;
    for (const stack_profile* p : stacks) {
      const calibration_origin o = (cal.*origin)(p->name);
      out += out.empty() ? "" : "/";
      out += o == calibration_origin::measured ? "measured"
             : o == calibration_origin::derived ? cal.derived_from + "'s"
                                                : "default";
    }
    return out;
  };
  const std::string context_head = "CUDA context " + names, time_head = "time constants " + names;
  fmt::print("Where the figures come from:\n{:<11} {:<5} {:<9} {:<7} {:<44} {}\n", "name", "cc", "memory", "matmul",
             context_head, time_head);
  for (const gpu_spec& g : c.gpus()) {
    const calibration cal = c.calibration_for(g);
    fmt::print("{:<11} {:<5} {:<9} {:<7} {:<44} {}\n", g.name,
               g.capability.known() ? fmt::format("{}.{}", g.capability.major, g.capability.minor) : std::string("-"),
               memory_source_name(g.memory_from),
               g.matmul_achievable_fraction > 0 ? fmt::format("{:.1f}%", 100 * g.matmul_achievable_fraction) : std::string("-"),
               cells(cal, &calibration::context_origin), cells(cal, &calibration::timing_origin));
  }
  fmt::print("cc: CUDA's compute capability\n"
             "memory: measured: cudaMemGetInfo's total, measured by trainplan; reported: cudaMemGetInfo's total as\n"
             "  PyTorch's out-of-memory message prints it, in a report data/gpus.json cites; estimate: nvidia-smi's total,\n"
             "  a few hundred MiB above what CUDA gives\n"
             "matmul: the largest bf16 GEMM rate measured on the GPU over its datasheet peak (data/gpus.json cites it); GEMM\n"
             "  efficiencies not measured on a GPU are the reference GPU's times the ratio of the two (-: not published)\n"
             "CUDA context and time constants, per stack ({}):\n"
             "  measured: the GPU's own entry in data/calibration.json\n"
             "  <gpu>'s: that GPU's own entry; its time constants are fractions of the datasheet peaks and bandwidth,\n"
             "    so times scale by the two datasheets' ratios; its context only for the same compute capability\n"
             "  default: data/calibration.json's default entry, not measured on this GPU\n",
             sharing);
}

}  // namespace

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
      fmt::print("peak TFLOP/s are dense tensor-core figures; sources are in data/gpus.json\n\n");
      print_gpu_origins(c);
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
