// `plan check FILE...`: predicts every configuration a collector report measured (scripts/collect_hf.py,
// the format of tests/data/measurements/) as the stack it measured, and prints predicted beside measured. The
// prediction and its errors are planner/measure/measurement_check.hpp's; here the files read and the table.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <unistd.h>

#include "cli/commands.hpp"
#include "cli/format.hpp"
#include "cli/measurement_check.hpp"
#include "cli/number_option.hpp"
#include "cli/output_file.hpp"
#include "cli/progress.hpp"
#include "planner/io/catalog.hpp"
#include "planner/profiles/profile.hpp"
#include "planner/util/input_error.hpp"
#include "planner/measure/measured_runs.hpp"
#include "planner/measure/measurement_check.hpp"
#include "planner/measure/median.hpp"
#include "planner/evaluate/plan.hpp"
#include "planner/util/text_file.hpp"

namespace trainplan::cli {
namespace {

struct check_args {
  std::vector<std::string> files;
  std::string gpu;  // empty: each report's own GPU (its env line)
  double tensor_tolerance_pct = 3.0, device_tolerance_pct = 5.0, time_tolerance_pct = 20.0;
  std::string segments_out;
  bool one_process = false;
  bool json = false;
  std::string data_dir;  // as for plan: its gpus.json, models.json and calibration.json add to or override the built-in data
};


// Segments are whole MiB in practice (2 MiB, 20 MiB, multiples of 2 MiB); a fraction is shown when not.
std::string mib(std::uint64_t bytes) {
  if (bytes % (1ull << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1ull << 20));
}

std::string mib_signed(std::int64_t bytes) {
  const std::uint64_t magnitude = bytes < 0 ? 0 - static_cast<std::uint64_t>(bytes) : static_cast<std::uint64_t>(bytes);
  return fmt::format("{}{}", bytes < 0 ? '-' : '+', magnitude >= (1ull << 30) ? gib(magnitude) : mib(magnitude));
}

// Under the run's row: its segments (collect_hf.py's "segments") beside those the replay reserves, by size.
void print_segments(const measured_run& r, const run_check& check) {
  constexpr std::size_t shown_sizes = 8, shown_buffers = 4;
  const plan_result& p = check.plan;
  if (r.run.expandable_segments) {
    fmt::print("  {:<10} segments: not compared (with expandable segments a pool maps pages into one segment)\n", "");
    return;
  }
  if (!check.segments) {
    fmt::print("  {:<10} segments: not compared (the plan did not replay the allocator for this run)\n", "");
    return;
  }
  const segment_comparison& c = *check.segments;
  fmt::print("  {:<10} segments: measured {} ({}), replayed {} ({}), {} of a size both hold{}\n", "", c.measured_count,
             gib(c.measured_bytes), c.replayed_count, gib(c.replayed_bytes), c.matched_count,
             c.measured_bytes < r.reserved_peak_bytes
                 ? fmt::format(" (the measured ones sum to {} below the reserved peak: the run gave some back)",
                               mib(r.reserved_peak_bytes - c.measured_bytes))
             : c.measured_bytes > r.reserved_peak_bytes
                 ? fmt::format(" (the measured ones sum to {} above the reserved peak, which no run holds: the report "
                               "is inconsistent)",
                               mib(c.measured_bytes - r.reserved_peak_bytes))
                 : "");
  // PyTorch allocates its cuBLAS workspaces through the caching allocator: the measured segments hold them (a
  // segment of their own, or room in a freed block). Where the replay does not, the device peak adds them.
  if (p.overhead.cublas_workspace_bytes > 0 && !p.cublas_workspaces_in_replay)
    fmt::print("  {:<10}   (the replay leaves out PyTorch's cuBLAS workspaces, {} in all, which the device peak adds)\n",
               "", mib(p.overhead.cublas_workspace_bytes));
  for (std::size_t i = 0; i < c.differences.size() && i < shown_sizes; ++i) {
    const segment_size_difference& d = c.differences[i];
    // The replay's extra segments of this size, by the buffer and step that made them (runs of the same one
    // counted: a layer's buffer makes one in each layer).
    std::vector<std::pair<const allocator_growth*, std::uint64_t>> makers;
    for (const allocator_growth& g : d.replay_extra)
      if (!makers.empty() && makers.back().first->tensor == g.tensor && makers.back().first->step == g.step) ++makers.back().second;
      else makers.push_back({&g, 1});
    std::string extra;
    for (std::size_t k = 0; k < makers.size() && k < shown_buffers; ++k) {
      const allocator_growth& g = *makers[k].first;
      extra += fmt::format("{}{} {}{}", k ? ", " : "; the replay's last made by ",
                           g.step < 0 ? std::string("model creation") : fmt::format("step {}", g.step + 1), g.tensor,
                           makers[k].second > 1 ? fmt::format(" (x{})", makers[k].second) : "");
    }
    if (makers.size() > shown_buffers) extra += fmt::format(" and {} more", makers.size() - shown_buffers);
    fmt::print("  {:<10}   {} {}: measured {}, replayed {} ({}){}\n", "", d.small_pool ? "small" : "large", mib(d.bytes),
               d.measured, d.replayed, mib_signed(d.difference_bytes()), extra);
  }
  if (c.differences.size() > shown_sizes) {
    std::int64_t rest = 0;
    for (std::size_t i = shown_sizes; i < c.differences.size(); ++i) rest += c.differences[i].difference_bytes();
    fmt::print("  {:<10}   and {} more sizes ({})\n", "", c.differences.size() - shown_sizes, mib_signed(rest));
  }
}

// Under the run's row: the allocator's counters the collector read (memory_stats()) beside the replay's, in the
// GPU's memory as the run had it. PyTorch's cudaMalloc calls include its cuBLAS workspaces'.
void print_allocator_counts(const measured_run& r, const plan_result& p) {
  const measured_allocator_counts& m = r.allocator_counts;
  std::string measured;
  auto add = [&measured](const std::optional<std::uint64_t>& n, const char* what) {
    if (n) measured += fmt::format("{}{} {}", measured.empty() ? "" : ", ", *n, what);
  };
  add(m.device_allocs, "cudaMalloc");
  add(m.device_frees, "cudaFree");
  add(m.alloc_retries, "retries after freeing its cache");
  add(m.ooms, "out-of-memory errors");
  const std::string replayed =
      !p.allocator ? std::string("not replayed")
                   : fmt::format("the replay: {} segments made{}, {} releases of its cache", p.allocator->segments_made,
                                 r.run.expandable_segments ? " (address ranges)" : "", p.allocator->cache_releases);
  fmt::print("  {:<10} allocator: {}; {}\n", "", measured, replayed);
}

// --segments-out: one JSON line a replayed segment (scripts/compare_allocator_history.py reads them beside
// PyTorch's recorded history).
void append_segment_lines(std::string& out, const measured_run& r, const std::vector<allocator_growth>& growth) {
  for (const allocator_growth& g : growth) {
    const nlohmann::ordered_json line = {{"id", r.id},
                                         {"step", g.step + 1},
                                         {"pool", g.small_pool ? "small" : "large"},
                                         {"bytes", g.added_bytes},
                                         {"tensor", std::string(g.tensor)},
                                         {"reserved_bytes", g.reserved_bytes}};
    out += line.dump() + "\n";
  }
}

// Under a profiled run's row: the GPU's busy time beside the roofline's kernel time (the step's time by op
// class, less the overhead: the device's own share, whatever the host does), and the kernels launched beside
// the ops' count. This checks the device side alone; the step time also holds the host's.
void print_gpu_busy(const measured_gpu_profile& g, const gpu_busy_check& b) {
  fmt::print("  {:<10} GPU busy {:.1f} ms, the roofline's kernels {:.1f} ms ({:+.1f}%); kernels {}, predicted {:.0f} ({:+.1f}%)\n",
             "", g.busy_seconds * 1e3, b.kernel_seconds * 1e3, b.busy_error_pct, g.kernels, b.predicted_kernels,
             b.kernels_error_pct);
}

// A file's step times beside the GPU's busy times. The step is the kernels' time plus what the host adds
// around them (Python, launches, synchronisation: planner/time/roofline.cpp's host costs), which depends on the
// CPU; the calibration's host costs are those of the host it was fitted on. Where the steps miss but the kernels
// agree, that is what differs, and the line says how to fit this host's.
struct step_miss {
  std::size_t compared = 0, beyond = 0;  // runs with a step time compared; beyond the tolerance
  std::size_t beyond_profiled = 0, beyond_kernels_agree = 0;  // of those beyond: profiled; with the kernels within it
};

void print_host_note(const step_miss& m, double tolerance_pct, const calibration& calib, const measured_file& f,
                     const std::string& path) {
  if (m.beyond == 0) return;
  fmt::print("  step time: {} of {} run{} beyond {}%", m.beyond, m.compared, m.compared == 1 ? "" : "s", tolerance_pct);
  if (m.beyond_profiled == 0) {
    fmt::print("\n");
    return;
  }
  fmt::print("; the GPU's kernel time of {} of the {} profiled among them is within {}%:\n"
             "    the host's time around the kernels differs, which depends on the CPU. The calibration's host costs\n"
             "    come from {}\n"
             "    This host's: plan calibrate --framework {} {} -o DIR/calibration.json, then plan check --data-dir DIR\n",
             m.beyond_kernels_agree, m.beyond_profiled, tolerance_pct,
             calib.source.empty() ? std::string("the built-in calibration.") : "its source: " + calib.source, f.stack->name, path);
}

void print_gpu_busy_summary(const std::vector<double>& errors_pct) {
  const error_summary s = summarize_errors(errors_pct);
  const std::size_t n = errors_pct.size();
  fmt::print("  GPU busy time of the {} profiled run{}: the roofline's kernel time within {:.1f}% (median {:.1f}%; "
             "reported, not checked against a tolerance)\n",
             n, n == 1 ? "" : "s", s.max_pct, s.median_pct);
}

// A run on several GPUs: its layout, as the configuration column shows it.
std::string layout_text(const measured_run& r) {
  if (!r.layout) return "";
  const measured_layout& l = *r.layout;
  return fmt::format(" {} x{} rank {}{}", l.mode, l.world_size, l.rank,
                     l.fake_process_group ? " (fake process group)"
                     : l.nodes > 0        ? fmt::format(" ({} node{})", l.nodes, l.nodes == 1 ? "" : "s")
                                          : std::string());
}

}  // namespace

const gpu_spec& report_gpu(const catalog& data, const measured_file& f, const std::string& path,
                           const std::string& gpu_option) {
  const gpu_spec* measured_on = data.gpu_by_device_name(f.gpu);
  if (gpu_option.empty()) {
    if (!measured_on)
      throw input_error(fmt::format("{}: measured on '{}', which no GPU of gpus.json names (device_names): give --gpu "
                                    "NAME (plan gpus lists them)", path, f.gpu));
    return *measured_on;
  }
  const gpu_spec& given = data.gpu(gpu_option);
  if (measured_on && measured_on != &given)
    throw input_error(fmt::format("{}: measured on an {} ({} in gpus.json), not on --gpu {}: leave --gpu out, or "
                                  "give --gpu {}", path, f.gpu, measured_on->name, given.name, measured_on->name));
  return given;
}

int check_measurements(const std::vector<std::string>& files, const check_target_for& target_for,
                       double tensor_tolerance_pct, double device_tolerance_pct, double time_tolerance_pct,
                       std::string* segments_jsonl, bool one_process) {
  const check_tolerances tolerances{tensor_tolerance_pct, device_tolerance_pct, time_tolerance_pct};
  check_totals totals;
  // Each run replays the allocator: a report of many runs takes seconds. On a terminal the rows printed as they
  // come show the progress; into a file or a pipe, a line on stderr does.
  progress bar("plan check", 0, "runs predicted", !::isatty(STDOUT_FILENO));
  for (const std::string& path : files) {
    std::vector<double> busy;  // the GPU-busy errors of this file's profiled runs
    step_miss miss;
    measured_file f = parse_measurements(read_text_file(path), path);
    if (one_process) mark_one_process(f);
    const check_target target = target_for(f, path);
    const gpu_spec& gpu = *target.gpu;
    const calibration& calib = target.calib;
    fmt::print("{}: {} (predicted as {}), torch {}, transformers {}{}; CUDA context {} as measured{}\n", path, f.gpu,
               gpu.name, f.torch, f.transformers, f.host_cpu.empty() ? std::string() : "; host " + f.host_cpu,
               gib(f.context_bytes),
               one_process ? "; runs measured one after another in one process (the first made the cuBLAS workspaces)" : "");
    fmt::print("  {:<10} {:>12} {:>12} {:>8}   {:>12} {:>12} {:>8}   {:>9} {:>9} {:>8}   {}\n", "run", "tensor peak",
               "predicted", "error", "device peak", "replayed", "error", "step", "predicted", "error", "configuration");
    for (const measured_run& r : f.runs) {
      const run_check c = check_measured_run(f, r, gpu, calib, tolerances, segments_jsonl != nullptr);
      bar.advance();
      totals.add(r, c);
      const plan_result& p = c.plan;
      const std::string what = fmt::format(
          "{} L={} h={} s={} b={} {} {}{}{}{}{}{}{}{}", family_name(r.model.family), r.model.layers, r.model.hidden, r.run.seq,
          r.run.micro_batch, precision_name(r.run.precision), attn_implementation_name(r.run.attention),
          r.run.loss == loss_kind::standard ? "" : fmt::format(" loss {}", loss_name(r.run.loss)),
          r.run.packing_doc_tokens > 0 ? fmt::format(" packed {}", r.run.packing_doc_tokens) : "",
          compiles_layers(r.run) ? fmt::format(" compiled ({})", compile_scope_name(r.run.compile)) : "",
          r.run.recompute == recompute_mode::full ? " checkpointed" : "",
          r.run.optimizer_impl == optimizer_impl_kind::fused ? " fused" : "",
          r.run.expandable_segments ? " expandable-segments" : "", layout_text(r));
      if (!c.not_predicted.empty()) {
        fmt::print("  {:<10} not predicted: plan cannot predict this run yet ({}) ({})\n", r.id, c.not_predicted, what);
        continue;
      }
      if (r.out_of_memory) {
        fmt::print("  {:<10} ran out of memory; plan says {} ({})\n", r.id, p.fits ? "it fits: WRONG" : "it does not fit",
                   what);
        if (r.allocator_counts.any()) print_allocator_counts(r, p);
        continue;
      }
      const double ts = c.step_error_pct;
      if (!r.memory_measured) {  // a step time alone
        fmt::print("  {:<10} {:>12} {:>12} {:>8}   {:>12} {:>12} {:>8}   {:>7.1f}ms {:>7.1f}ms {:>+7.2f}%   {}\n", r.id, "-",
                   "-", "", "-", "-", "", r.step_seconds * 1e3, p.time.step_seconds * 1e3, ts, what);
        ++miss.compared;
        if (std::abs(ts) > time_tolerance_pct) ++miss.beyond;
        continue;
      }
      // A step time that is no measurement of the run planned (the fake process group's): shown, not compared.
      const std::string time = c.time_compared
                                   ? fmt::format("{:>7.1f}ms {:>7.1f}ms {:>+7.2f}%", r.step_seconds * 1e3, p.time.step_seconds * 1e3, ts)
                                   : fmt::format("{:>9} {:>7.1f}ms {:>8}", "n/c", p.time.step_seconds * 1e3, "");
      fmt::print("  {:<10} {:>12} {:>12} {:>+7.2f}%   {:>12} {:>12} {:>+7.2f}%   {}   {}\n", r.id, gib(r.alloc_peak_bytes),
                 gib(static_cast<std::uint64_t>(c.predicted_tensor_bytes)), c.tensor_error_pct,
                 gib(static_cast<std::uint64_t>(c.measured_device_bytes)), gib(static_cast<std::uint64_t>(c.predicted_device_bytes)),
                 c.device_error_pct, time, what);
      if (!c.time_compared)
        fmt::print("  {:<10}   step time not compared: collectives under the fake process group take no time (memory only)\n", "");
      // A run on an allocator edge (planner/measure/measurement_check.hpp): a hint where a report's runs shared a
      // process (--one-process). Not checked.
      if (c.edge_reserved_bytes)
        fmt::print("  {:<10}   after another run in the same process the replay reserves {}: device peak {} ({:+.2f}%)\n", "",
                   gib(*c.edge_reserved_bytes), gib(f.context_bytes + *c.edge_reserved_bytes), c.edge_device_error_pct);
      if (!r.segments.empty()) print_segments(r, c);
      if (segments_jsonl) append_segment_lines(*segments_jsonl, r, c.growth);
      if (r.allocator_counts.any()) print_allocator_counts(r, p);
      if (r.gpu_profile) {
        print_gpu_busy(*r.gpu_profile, *c.busy);
        busy.push_back(c.busy->busy_error_pct);
      }
      if (c.time_compared) {
        ++miss.compared;
        if (std::abs(ts) > time_tolerance_pct) {
          ++miss.beyond;
          if (c.busy) {
            ++miss.beyond_profiled;
            if (std::abs(c.busy->busy_error_pct) <= time_tolerance_pct) ++miss.beyond_kernels_agree;
          }
        }
      }
    }
    if (!busy.empty()) print_gpu_busy_summary(busy);
    print_host_note(miss, time_tolerance_pct, calib, f, path);
  }
  bar.finish();
  fmt::print("largest error: tensor peak {:.2f}% (tolerance {}%), device peak {:.2f}% (tolerance {}%), step time "
             "{:.2f}% (tolerance {}%): {}\n",
             totals.worst_tensor_pct, tensor_tolerance_pct, totals.worst_device_pct, device_tolerance_pct,
             totals.worst_time_pct, time_tolerance_pct, totals.all_within ? "all within" : "NOT all within");
  if (totals.not_predicted > 0)
    fmt::print("{} run{} not predicted (plan cannot model {} layout yet): left out of the verdict\n", totals.not_predicted,
               totals.not_predicted == 1 ? "" : "s", totals.not_predicted == 1 ? "its" : "their");
  return totals.all_within ? 0 : 1;
}

void register_check_command(CLI::App& app, command_action& chosen) {
  auto args = std::make_shared<check_args>();
  CLI::App* cmd = app.add_subcommand(
      "check", "predict every run of a collector report (scripts/collect_hf.py) as the stack it measured and compare "
               "(exit 0 all within tolerance, 1 otherwise)");
  cmd->add_option("files", args->files, "JSON-lines reports written by scripts/collect_hf.py")->required()->type_name("FILE");
  cmd->add_option("--gpu,-g", args->gpu, "the GPU the runs were measured on (default: each report's, from the GPU its env line names)")->type_name("NAME");
  cmd->add_option("--tensor-tolerance", args->tensor_tolerance_pct, "allowed tensor-peak error in percent (default 3)")
      ->type_name("PCT")->check(number_in("--tensor-tolerance", 0, 100));
  cmd->add_option("--device-tolerance", args->device_tolerance_pct, "allowed device-peak error in percent (default 5)")
      ->type_name("PCT")->check(number_in("--device-tolerance", 0, 100));
  cmd->add_option("--time-tolerance", args->time_tolerance_pct, "allowed step-time error in percent (default 20)")
      ->type_name("PCT")->check(number_in("--time-tolerance", 0, 1000));
  cmd->add_option("--segments-out", args->segments_out,
                  "write the segments the allocator replay reserves for each run, one JSON line each ({id, step, "
                  "pool, bytes, tensor, reserved_bytes}; step 0 is the model's creation), in the order it makes them: "
                  "what scripts/compare_allocator_history.py sets beside PyTorch's recorded history")
      ->type_name("FILE");
  cmd->add_flag("--one-process", args->one_process,
               "the runs were measured one after another in one process (as the shared file's 14 were), not each in "
               "a process of its own as scripts/collect_hf.py does: every run after the first finds PyTorch's cuBLAS "
               "workspaces made, and the allocator replay does not make them again");
  cmd->add_option("--data-dir", args->data_dir,
                  "as for plan: GPUs, models and calibration beyond the built-in ones (a calibration.json that plan "
                  "calibrate --framework NAME -o wrote for this machine, say)")
      ->type_name("DIR");
  cmd->add_flag("--json", args->json, "print the comparison as one JSON object (docs/json.md)");
  cmd->footer("Example: python3 scripts/collect_hf.py --preset shared-h100 -o mine.jsonl && plan check mine.jsonl");

  cmd->callback([args, &chosen]() {
    chosen = [args]() -> int {
      const catalog data =
          catalog::load(args->data_dir.empty() ? std::nullopt : std::optional<std::filesystem::path>(args->data_dir));
      if (!args->gpu.empty()) data.gpu(args->gpu);  // an unknown name is an error before any file is read
      // --segments-out is checked before the report is printed (a folder, a read-only file), not found wrong after
      // it; the reports are read first, so that it is never one of them (output_file.hpp: an input is not replaced).
      for (const std::string& file : args->files) read_text_file(file);
      if (args->json && !args->segments_out.empty())
        throw input_error("--segments-out: not with --json (it writes JSON lines of its own; run them apart)");
      const check_target_for target_for = [&data, args](const measured_file& f, const std::string& path) {
        const gpu_spec& gpu = report_gpu(data, f, path, args->gpu);
        return check_target{&gpu, data.calibration_for(gpu)};
      };
      if (args->json)
        return check_measurements_json(args->files, target_for, args->tensor_tolerance_pct, args->device_tolerance_pct,
                                       args->time_tolerance_pct, args->one_process);
      std::optional<output_file> segments_out;
      if (!args->segments_out.empty()) segments_out.emplace(args->segments_out);
      std::string segments;
      const int status = check_measurements(args->files, target_for, args->tensor_tolerance_pct,
                                            args->device_tolerance_pct, args->time_tolerance_pct,
                                            segments_out ? &segments : nullptr, args->one_process);
      if (segments_out) {
        segments_out->write(segments);
        segments_out->commit();
      }
      return status;
    };
  });
}

}  // namespace trainplan::cli
