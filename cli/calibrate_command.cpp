// `plan calibrate REPORT|FOLDER...`: fits data/calibration.json's constants for one GPU from `plan
// validate --backend cuda` reports and prints how close the calibrated planner comes to each run.
// Exit 0 when within the calibration's targets (2% of device peak memory, 10% of step time), 1 otherwise.
//
// A report it can use (written by the CUDA backend) has, besides plan validate's fields:
//   "gpu": {"name": "h100"},
//   "device": {"context_bytes", "workspace_bytes", "device_peak_bytes", "step_seconds"}
#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <fstream>
#include <sstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <type_traits>

#include "planner/profiles/registry.hpp"
#include "cli/bench_run.hpp"
#include "cli/output_file.hpp"
#include "cli/calibrate_shared.hpp"
#include "cli/commands.hpp"
#include "cli/format.hpp"
#include "cli/measurement_check.hpp"
#include "planner/measure/calibration_fit.hpp"
#include "planner/measure/cluster_fit.hpp"
#include "planner/measure/collector_fit.hpp"
#include "planner/measure/measured_runs.hpp"
#include "planner/io/catalog.hpp"
#include "planner/io/embedded_data.hpp"
#include "planner/util/input_error.hpp"
#include "planner/util/names.hpp"
#include "planner/util/text_file.hpp"
#include "planner/evaluate/plan.hpp"
#include "planner/measure/timing_fit.hpp"

namespace trainplan::cli {
namespace {

using json = nlohmann::json;

template <typename T>
T field(const json& j, const char* a, const char* b, const std::string& file) {
  if (!j.contains(a) || !j[a].contains(b))
    throw input_error(fmt::format("{}: missing {}.{}{}", file, a, b,
                                  std::string(a) == "device" ? " (calibrate needs reports from plan validate --backend cuda)" : ""));
  // A count must be a JSON integer of at least 0: get<std::uint64_t>() converts 1e30 or -1.5 with a cast
  // whose result is undefined (UBSan: float-cast-overflow).
  if constexpr (std::is_same_v<T, std::uint64_t>)
    if (!j[a][b].is_number_unsigned())
      throw input_error(fmt::format("{}: {}.{} must be a non-negative integer", file, a, b));
  try {
    return j[a][b].get<T>();
  } catch (const json::exception&) {
    throw input_error(fmt::format("{}: {}.{} has the wrong type", file, a, b));
  }
}


// The model and run a report describes, rebuilt so the planner can evaluate them again.
void model_and_run(const json& j, const std::string& file, model_spec& m, run_config& r) {
  m.name = field<std::string>(j, "model", "name", file);
  m.family = parse_family(field<std::string>(j, "model", "family", file));
  m.layers = field<std::uint64_t>(j, "model", "layers", file);
  m.hidden = field<std::uint64_t>(j, "model", "hidden", file);
  m.heads = field<std::uint64_t>(j, "model", "heads", file);
  m.kv_heads = field<std::uint64_t>(j, "model", "kv_heads", file);
  m.head_dim = field<std::uint64_t>(j, "model", "head_dim", file);
  m.ffn = field<std::uint64_t>(j, "model", "ffn", file);
  m.vocab = field<std::uint64_t>(j, "model", "vocab", file);
  m.max_positions = field<std::uint64_t>(j, "model", "max_positions", file);
  m.tied_embeddings = field<bool>(j, "model", "tied_embeddings", file);
  m.qkv_bias = field<bool>(j, "model", "qkv_bias", file);
  r.seq = field<std::uint64_t>(j, "run", "seq", file);
  r.micro_batch = field<std::uint64_t>(j, "run", "micro_batch", file);
  r.grad_accum = field<std::uint64_t>(j, "run", "grad_accum", file);
  r.precision = parse_precision(field<std::string>(j, "run", "precision", file));
  r.grad_dtype = parse_grad_dtype(field<std::string>(j, "run", "grad_dtype", file));
  r.optimizer = parse_optimizer(field<std::string>(j, "run", "optimizer", file));
  r.recompute = parse_recompute(field<std::string>(j, "run", "recompute", file));
  r.attention = parse_attention(field<std::string>(j, "run", "attention", file));
  r.dropout = field<double>(j, "run", "dropout", file);
}

// bench.json of `plan bench --backend cuda`: {gpu, device, runs: [{model, seq, micro_batch, step_seconds, ...}]}.
// Each run that did not run out of memory is a step time without memory figures, of the model and run the
// bench trains (cli/bench_run.hpp).
void add_bench_runs(const json& j, const std::filesystem::path& path, const catalog& data, std::string& gpu_name,
                    std::vector<calibration_observation>& runs) {
  const std::string file = path.string();
  if (!j.contains("gpu") || !j["gpu"].is_string()) throw input_error(fmt::format("{}: a bench report needs gpu, a GPU's name", file));
  const std::string gpu = j["gpu"].get<std::string>();
  if (!gpu_name.empty() && gpu != gpu_name)
    throw input_error(fmt::format("calibrate: reports mix GPUs ({} and {}): calibrate one GPU at a time", gpu_name, gpu));
  gpu_name = gpu;
  const gpu_spec& g = data.gpu(gpu);
  if (!j["runs"].is_array()) throw input_error(fmt::format("{}: runs must be a list", file));
  for (const json& run : j["runs"]) {
    if (!run.is_object()) throw input_error(fmt::format("{}: each of runs must be an object", file));
    if (run.contains("out_of_memory")) continue;  // no step was timed
    const json wrapped{{"run", run}};
    const std::string model = field<std::string>(wrapped, "run", "model", file);
    const std::uint64_t seq = field<std::uint64_t>(wrapped, "run", "seq", file);
    const std::uint64_t micro_batch = field<std::uint64_t>(wrapped, "run", "micro_batch", file);
    model_spec m;
    run_config r;
    bench_model_and_run(data, model, seq, micro_batch, m, r);
    calibration_observation o = planned_observation(fmt::format("{} {} s{} b{}", path.filename().string(), model, seq, micro_batch),
                                                    m, r, g, data.calibration_for(g));
    o.memory_measured = false;
    o.step_seconds = field<double>(wrapped, "run", "step_seconds", file);
    runs.push_back(o);
  }
}

}  // namespace

void register_calibrate_command(CLI::App& app, command_action& chosen) {
  auto args = std::make_shared<calibrate_args>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "fit calibration constants for a GPU from CUDA validation and bench reports (exit 0 within 2% memory, 10% time)");
  cmd->add_option("reports", args->inputs,
                  "report files (plan validate --backend cuda's, and bench.json of plan bench --backend cuda: step times "
                  "alone), or folders of them (reports/<gpu>-<date>/)")->type_name("PATH...");
  cmd->add_option("-o,--output", args->output,
                  "calibration.json to update with this GPU's entry (created from the built-in one if missing); with "
                  "--cluster-from, the clusters.json to write the fitted cluster into")
      ->type_name("FILE");
  cmd->add_option("--cluster-from", args->cluster_from,
                  "instead of reports: collector reports of a real multi-GPU run (collect_hf.py --parallel under torchrun "
                  "with --profile), whose per-collective NCCL times scale the cluster model's effective bandwidth of each "
                  "collective and scope (the median measured/model ratio); writes a clusters.json for --data-dir")
      ->type_name("FILE...");
  cmd->add_option("--cluster", args->cluster,
                  "with --cluster-from: the cluster preset the reports were measured on (default: --gpu's usual node)")
      ->type_name("NAME");
  cmd->add_option("--data-dir", args->data_dir, "as for plan: GPUs and models beyond the built-in ones")->type_name("DIR");
  cmd->add_flag("--json", args->json, "print the fit as one JSON object (the harness's reports)");
  cmd->add_option("--framework", args->framework,
                  fmt::format("{} (default): validation reports of this project's harness; another stack: its collector's "
                              "reports (scripts/collect_hf.py: {}), which set its CUDA context and step-time constants",
                              harness_profile().name, default_cli_profile().name))
      ->type_name("NAME");
  cmd->add_flag("--held-out", args->held_out,
                "also predict each run's step time from the constants fitted on the other runs (leave-one-out: one "
                "fit per run; the exit code stays the fit's)");
  cmd->add_option("--device-only", args->device_only,
                  "with a collector's reports: profiled collector reports of another host (the same GPU and software) whose "
                  "GPU busy times join the fit of the device constants; their step times and memory are not fitted")
      ->type_name("FILE...");
  cmd->add_option("--gpu,-g", args->gpu,
                  "with a collector's reports: the GPU the reports were measured on (default h100); the harness's reports name "
                  "theirs, which --gpu, when given, must match")
      ->type_name("NAME");
  cmd->callback([args, &chosen, cmd]() {
    const bool gpu_named = cmd->count("--gpu") > 0;
    chosen = [args, gpu_named]() -> int {
      const catalog data = catalog::load(args->data_dir.empty() ? std::nullopt : std::optional<std::filesystem::path>(args->data_dir));
      if (!args->cluster_from.empty()) {
        if (!args->inputs.empty() || !args->framework.empty() || args->json || args->held_out || !args->device_only.empty())
          throw input_error("calibrate --cluster-from fits a cluster alone: no other reports, --framework, --json, "
                            "--held-out or --device-only");
        return calibrate_cluster(*args, data);
      }
      if (!args->cluster.empty()) throw input_error("calibrate --cluster: with --cluster-from");
      if (args->inputs.empty())
        throw input_error("calibrate: give reports (or folders of them), or --cluster-from REPORT... for a cluster");
      const stack_profile& stack = args->framework.empty() ? harness_profile() : profile_named(args->framework);
      const bool collector = &stack != &harness_profile();
      if (collector && args->json)  // its report is plan check's table, which has no JSON form
        throw input_error(fmt::format("calibrate --json: for the harness's reports (--framework {}); a collector's reports "
                                      "print their table", harness_profile().name));
      if (collector) return calibrate_from_collector(*args, data, stack, gpu_named);
      if (!args->device_only.empty())
        throw input_error("calibrate --device-only: for a collector's reports (collect_hf.py --profile)");
      std::vector<std::filesystem::path> files;
      for (const std::string& in : args->inputs) {
        if (std::filesystem::is_directory(in)) {
          for (const auto& e : std::filesystem::directory_iterator(in))
            if (e.path().extension() == ".json") files.push_back(e.path());
        } else {
          files.emplace_back(in);
        }
      }
      std::sort(files.begin(), files.end());
      if (files.empty()) throw input_error("calibrate: no .json reports found");

      std::string gpu_name;
      std::vector<calibration_observation> runs;
      for (const auto& path : files) {
        const json j = read_json(path);
        const std::string file = path.string();
        if (j.is_object() && j.contains("kernels") && !j.contains("model")) {  // plan bench --kernels: no step to fit
          fmt::print(stderr, "plan calibrate: {}: a per-kernel benchmark (plan bench --kernels), not a training step: skipped\n", file);
          continue;
        }
        if (j.is_object() && j.contains("runs") && !j.contains("model")) {  // plan bench --backend cuda: step times
          add_bench_runs(j, path, data, gpu_name, runs);
          continue;
        }
        const std::string gpu = field<std::string>(j, "gpu", "name", file);
        if (!gpu_name.empty() && gpu != gpu_name)
          throw input_error(fmt::format("calibrate: reports mix GPUs ({} and {}): calibrate one GPU at a time", gpu_name, gpu));
        gpu_name = gpu;
        const gpu_spec& g = data.gpu(gpu);
        model_spec m;
        run_config r;
        model_and_run(j, file, m, r);
        calibration_observation o = planned_observation(path.filename().string(), m, r, g, data.calibration_for(g));
        o.tensor_peak_bytes = field<std::uint64_t>(j, "measured", "peak_bytes", file);
        o.device_peak_bytes = field<std::uint64_t>(j, "device", "device_peak_bytes", file);
        o.context_bytes = field<std::uint64_t>(j, "device", "context_bytes", file);
        o.workspace_bytes = field<std::uint64_t>(j, "device", "workspace_bytes", file);
        o.step_seconds = field<double>(j, "device", "step_seconds", file);
        runs.push_back(o);
      }
      const gpu_spec& g = data.gpu(gpu_name);
      // The harness's reports name their GPU; a --gpu that differs is a mistake, not an override.
      if (gpu_named && data.gpu(args->gpu).name != g.name)
        throw input_error(fmt::format("calibrate --gpu {}: the reports were measured on {}", args->gpu, g.name));
      const std::string harness(harness_profile().name);
      const calibration_fit fit = fit_calibration(runs, data.calibration_for(g), harness);
      std::optional<held_out_fit> held;
      if (args->held_out) held = fit_held_out(timing_observations(runs));
      const calibration& c = fit.fitted;
      const bool within = fit.within_targets();

      const stack_calibration& own = *c.stack(harness);
      json entry{{"cublas_workspace_bytes", c.cublas_workspace_bytes},
                 {"profiles", {{harness, {{"cuda_context_bytes", *own.cuda_context_bytes},
                                          {"allocator_slack_fraction", *own.allocator_slack_fraction},
                                          {"timing", timing_json(own.timing)}}}}},
                 {"source", fmt::format("{}{} run{} of {} (this project's harness, max errors: memory {:.2f}%, time {:.2f}%)",
                                        trainplan_source_prefix, runs.size(), runs.size() == 1 ? "" : "s",
                                        describe_inputs(args->inputs), fit.max_memory_error_pct, fit.max_time_error_pct)}};
      if (!args->output.empty()) {
        json doc;
        try {
          doc = parse_calibration_to_update(args->output);
        } catch (const json::exception& e) {
          throw input_error(fmt::format("{}: not valid JSON ({})", args->output, e.what()));
        }
        if (!doc.is_object() || (doc.contains("gpus") && !doc["gpus"].is_object()) ||
            (doc.contains("gpus") && doc["gpus"].contains(g.name) && !doc["gpus"][g.name].is_object()))
          throw input_error(fmt::format("{}: not a calibration file (an object with a \"gpus\" object)", args->output));
        // The fit's keys replace theirs in the GPU's entry; what a collector's reports fitted there stays.
        json& existing = doc["gpus"][g.name];
        if (existing.contains("profiles") && !existing["profiles"].is_object())
          throw input_error(fmt::format("{}: gpus.{}.profiles is not an object", args->output, g.name));
        // Not cublas_workspace_bytes: the harness sets its own workspace's size, and the key is every profile's.
        existing["profiles"][harness] = entry["profiles"][harness];
        existing["source"] = merged_source(existing, trainplan_source_prefix, entry["source"].get<std::string>());
        const std::string text = doc.dump(2) + "\n";
        // Never write what the loader would reject: read it back the way `plan --data-dir` will.
        catalog check = data;
        check.apply_calibration(text, false);
        write_output(args->output, text);  // a failed write leaves the old file
      }
      if (args->json) {
        json res = json::array();
        for (std::size_t i = 0; i < fit.residuals.size(); ++i) {
          const calibration_residual& r = fit.residuals[i];
          json row{{"report", r.label}, {"predicted_step_seconds", r.predicted_step_seconds},
                   {"measured_step_seconds", r.measured_step_seconds}, {"time_error_pct", r.time_error_pct}};
          if (r.memory_measured)
            row.update({{"predicted_device_peak_bytes", r.predicted_device_peak_bytes},
                        {"measured_device_peak_bytes", r.measured_device_peak_bytes}, {"memory_error_pct", r.memory_error_pct}});
          if (held) row["held_out_step_seconds"] = held->predicted_seconds[i], row["held_out_time_error_pct"] = held->error_pct[i];
          res.push_back(row);
        }
        json out{{"gpu", g.name}, {"calibration", entry}, {"residuals", res},
                 {"max_memory_error_pct", fit.max_memory_error_pct}, {"max_time_error_pct", fit.max_time_error_pct},
                 {"within_targets", within}};
        if (held) out["held_out"] = {{"median_time_error_pct", held->median_error_pct}, {"max_time_error_pct", held->max_error_pct}};
        fmt::print("{}\n", out.dump(2));
        return within ? 0 : 1;
      }
      fmt::print("plan calibrate: {} ({}) from {} run{}\n", g.name, g.description, runs.size(), runs.size() == 1 ? "" : "s");
      fmt::print("  CUDA context       {}\n  cuBLAS workspace   {}\n  allocator slack    {} of tensor bytes\n",
                 gib(*own.cuda_context_bytes), gib(c.cublas_workspace_bytes), percent(*own.allocator_slack_fraction));
      const timing_constants& k = own.timing;
      fmt::print("  step time          GEMMs {} x m/(m+{:.0f}) x n/(n+{:.0f}) x k/(k+{:.0f}) of peak, attention {}, "
                 "bandwidth {}, {:.2f} us per kernel, {:.3f} ms per step, host {:.2f} us per forward and {:.2f} us per "
                 "backward launch\n",
                 percent(k.gemm_efficiency), k.gemm_half_dim, k.gemm_half_dim, k.gemm_half_dim,
                 percent(k.attention_efficiency), percent(k.bandwidth_fraction), k.kernel_seconds * 1e6,
                 k.step_seconds * 1e3, k.forward_kernel_seconds * 1e6, k.backward_kernel_seconds * 1e6);
      fmt::print("\n  {:<48} {:>14} {:>14} {:>8} {:>10} {:>10} {:>8}{}\n", "run", "device peak", "predicted", "error", "step s",
                 "predicted", "error", held ? fmt::format(" {:>10} {:>8}", "held out", "error") : "");
      for (std::size_t i = 0; i < fit.residuals.size(); ++i) {
        const calibration_residual& r = fit.residuals[i];
        const std::string memory = r.memory_measured ? fmt::format("{:>14} {:>14} {:>+7.2f}%", gib(r.measured_device_peak_bytes),
                                                                   gib(r.predicted_device_peak_bytes), r.memory_error_pct)
                                                     : fmt::format("{:>14} {:>14} {:>8}", "-", "-", "");
        fmt::print("  {:<48} {} {:>10.4f} {:>10.4f} {:>+7.2f}%{}\n", r.label, memory, r.measured_step_seconds,
                   r.predicted_step_seconds, r.time_error_pct,
                   held ? fmt::format(" {:>10.4f} {:>+7.2f}%", held->predicted_seconds[i], held->error_pct[i]) : "");
      }
      fmt::print("\nMemory: largest error {:.2f}% (target {:.0f}%): {}. Time: largest error {:.2f}% (target {:.0f}%): {}.\n",
                 fit.max_memory_error_pct, calibration_memory_target_pct, fit.memory_within_target ? "met" : "NOT met",
                 fit.max_time_error_pct, calibration_time_target_pct, fit.time_within_target ? "met" : "NOT met");
      if (held)
        fmt::print("Held out (each run predicted by the constants fitted on the other {}): median error {:.2f}%, largest {:.2f}%.\n",
                   runs.size() - 1, held->median_error_pct, held->max_error_pct);
      if (!args->output.empty()) fmt::print("Wrote the {} entry to {}.\n", g.name, args->output);
      else fmt::print("Entry for calibration.json (gpus.{}): {}\n", g.name, entry.dump());
      return within ? 0 : 1;
    };
  });
}

}  // namespace trainplan::cli
