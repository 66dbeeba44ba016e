// `plan bench --planner`: how fast the planner is. Prints configurations evaluated per second on one core (the
// best of three passes, and their median); the allocator replay's rate beside it (configurations and nanoseconds
// per allocator event, on a strided sample; --seconds bounds it); a slice of the space swept with the replay on
// every core as plan sweep runs it, and what a million such rows would take; the analytic rate on every core; the
// time of a 1,000,000-configuration sweep written to CSV with every core (into an unnamed temporary file); and the
// estimate's error against the replay on the committed collector reports (bench_estimate.hpp).
// `plan bench --backend cuda [--kernels]`: how fast the harness trains on the GPU, and each of its kernels.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>
#include <unistd.h>
#include <vector>

#include "cli/number_option.hpp"
#include "cli/bench_estimate.hpp"
#include "cli/bench_kernels.hpp"
#include "cli/bench_run.hpp"
#include "cli/commands.hpp"
#include "cli/output_file.hpp"
#include "cli/format.hpp"
#include "cli/sweep_output.hpp"
#include "cli/sweep_space_options.hpp"
#include "planner/io/catalog.hpp"
#include "planner/util/input_error.hpp"
#include "planner/evaluate/plan.hpp"
#include "planner/allocator/program_cache.hpp"
#include "planner/allocator/replay_program.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/measure/measured_step.hpp"
#include "validate/validation.hpp"

#include "cli/cuda_backend.hpp"

namespace trainplan::cli {
namespace {

struct bench_args {
  bool planner = false, kernels = false;
  double seconds = 0;  // --planner: the most the allocator replay's sample runs (0: the whole sample)
  std::string backend, gpu = "h100", report_dir = "reports";
};

// One run of the CUDA benchmark, and llm.c's tokens/s on the same GPU where it was measured (an H100, bf16,
// no cuDNN): the speed the harness must reach.
struct bench_case {
  const char* model;
  std::uint64_t seq, micro_batch;
  double llmc_tokens_per_s;  // 0: not measured
};
constexpr bench_case cuda_bench_cases[] = {
    {"gpt2", 1024, 16, 317'700}, {"gpt2", 2048, 8, 0}, {"gpt2-xl", 1024, 8, 31'355}, {"gpt2-xl", 2048, 4, 0}};

// Tokens/s, MFU and HFU of real harness steps (bf16-mixed, flash attention, no recomputation), written to
// <report-dir>/<gpu>-<date>/bench.json (rewritten as each run ends); progress goes to the terminal line by line.
int bench_cuda(const bench_args& args) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a long run shows each line as it comes, even through a pipe
  const kernels::cuda::backend_api& backend = cuda_backend("--backend cuda");
  const catalog data = catalog::load();
  const gpu_spec& gpu = data.gpu(args.gpu);
  const std::filesystem::path dir = std::filesystem::path(args.report_dir) / fmt::format("{}-{}", gpu.name, today());
  nlohmann::json report = {{"device", backend.device_name()}, {"gpu", gpu.name}, {"date", today()}};
  if (args.kernels) {
    const model_spec m = data.model("gpt2").spec;
    fmt::print("plan bench --backend cuda --kernels on {}: GPT-2 124M, b16 s1024, bf16 (roofline from --gpu {})\n",
               backend.device_name(), gpu.name);
    fmt::print("  {:<32} {:<28} {:>10} {:>12} {:>9}\n", "kernel", "shape", "ms", "roofline ms", "of peak");
    nlohmann::json rows = nlohmann::json::array();
    auto print_row = [](const kernel_timing& k) {
      fmt::print("  {:<32} {:<28} {:>10.4f} {:>12.4f} {:>8.1f}%\n", k.kernel, k.shape, 1e3 * k.seconds, 1e3 * k.roofline_seconds,
                 100 * k.roofline_seconds / k.seconds);
      std::fflush(stdout);
    };
    for (const kernel_timing& k : time_kernels(backend.kernel_table(), gpu, m, 16, 1024, backend.flash_kernel, print_row))
      rows.push_back({{"kernel", k.kernel}, {"shape", k.shape}, {"flops", k.flops}, {"bytes", k.bytes},
                      {"seconds", k.seconds}, {"roofline_seconds", k.roofline_seconds}});
    report["kernels"] = rows;
    write_output((dir / "kernels.json").string(), report.dump(2) + "\n");
    fmt::print("wrote {}\n", (dir / "kernels.json").string());
    return 0;
  }
  fmt::print("plan bench --backend cuda on {} (planner peak from --gpu {}; flash attention kernels: {})\n",
             backend.device_name(), gpu.name, backend.flash_kernel(nullptr));
  report["flash_kernel"] = backend.flash_kernel(nullptr);
  fmt::print("  {:<10} {:>5} {:>6} {:>12} {:>12} {:>8} {:>8} {:>16}\n", "model", "seq", "batch", "step s", "tokens/s", "MFU",
             "HFU", "llm.c tokens/s");
  nlohmann::json runs = nlohmann::json::array();
  int failed = 0;
  for (const bench_case& c : cuda_bench_cases) {
    model_spec m;
    run_config r;
    bench_model_and_run(data, c.model, c.seq, c.micro_batch, m, r);
    validate::training_options options;
    options.steps = 4;  // the first warms up; then at least three steady steps, and more up to half a second (validate/validation.hpp)
    validate::device_measurements device;
    const plan_result p = evaluate_plan(m, r, gpu, data.calibration_for(gpu));
    nlohmann::json run = {{"model", c.model}, {"seq", c.seq}, {"micro_batch", c.micro_batch}};
    const std::string target = c.llmc_tokens_per_s > 0 ? grouped(static_cast<std::uint64_t>(c.llmc_tokens_per_s)) : "-";
    try {
      const validate::validation_result v = validate::validate_on(backend.kernel_table(), m, r, options, &device);
      const double step = v.device->step_seconds;
      const measured_rates rates = rates_of_measured_step(p, step);
      const double tokens_per_s = rates.tokens_per_second;
      run["step_seconds"] = step;
      run["tokens_per_second"] = tokens_per_s;
      run["mfu"] = rates.mfu;
      run["hfu"] = rates.hfu;
      run["device_peak_bytes"] = v.device->device_peak_bytes;
      if (c.llmc_tokens_per_s > 0) run["llmc_tokens_per_second"] = c.llmc_tokens_per_s;
      fmt::print("  {:<10} {:>5} {:>6} {:>12.4f} {:>12} {:>7.1f}% {:>7.1f}% {:>16}\n", c.model, c.seq, c.micro_batch, step,
                 grouped(static_cast<std::uint64_t>(tokens_per_s)), 100 * run["mfu"].get<double>(),
                 100 * run["hfu"].get<double>(), target);
    } catch (const validate::out_of_memory& oom) {  // a result like any other: recorded, and the next run goes on
      ++failed;
      run["out_of_memory"] = fmt::format("{} ({} bytes) at {}", oom.buffer_name, oom.requested_bytes, oom.phase_label);
      fmt::print("  {:<10} {:>5} {:>6} out of memory: {}\n", c.model, c.seq, c.micro_batch, run["out_of_memory"].get<std::string>());
    }
    runs.push_back(run);
    // Written again after every run, so that a command stopped at a time limit keeps the runs it finished.
    report["runs"] = runs;
    write_output((dir / "bench.json").string(), report.dump(2) + "\n");
  }
  fmt::print("wrote {}\n", (dir / "bench.json").string());
  return failed == 0 ? 0 : 4;
}

// 5 models x 5 GPUs x 2 precisions x 2 optimizers x 2 attention kernels x 5 dropouts x 10 sequence
// lengths x 10 micro-batches x 10 accumulations = 1,000,000 configurations.
sweep_space bench_space() {
  model_run_args a;
  a.model = "tinyllama-1.1b,llama-2-7b,llama-3.1-8b,mistral-7b,llama-2-70b";
  a.gpu = "h100,h200,a100-80gb,l40s,b200";
  a.framework = default_cli_profile().name;  // the default profile, the one most sweeps evaluate
  a.precision = "amp-bf16,fp32";
  a.optimizer = "adamw,adamw-8bit";
  a.attention = "flash,eager";
  a.recompute = "full";
  a.dropout = "0,0.05,0.1,0.15,0.2";
  a.seq = "256:128k:x2";
  a.micro_batch = "1:512:x2";
  a.grad_accum = "1:512:x2";
  return resolve_sweep_space(a);
}

}  // namespace

void register_bench_command(CLI::App& app, command_action& chosen) {
  auto args = std::make_shared<bench_args>();
  CLI::App* cmd = app.add_subcommand("bench", "measure speed: --planner for the analytic model");
  cmd->add_flag("--planner", args->planner,
                "configurations per second (analytic, and with the allocator replay: per configuration and per event), and a "
                "1M-configuration sweep to CSV");
  cmd->add_option("--seconds", args->seconds, "with --planner: stop the allocator replay's sample after about N seconds")
      ->type_name("N")
      ->check(number_in("--seconds", 0.001, 86400));
  cmd->add_option("--backend", args->backend, "cuda: tokens/s, MFU and HFU of real training steps on the GPU")->type_name("NAME");
  cmd->add_option("--gpu", args->gpu, "the GPU's entry in data/gpus.json for the dense peak (default h100)")->type_name("NAME");
  cmd->add_flag("--kernels", args->kernels, "with --backend cuda: time each kernel against its roofline (kernels.json)");
  cmd->add_option("--report-dir", args->report_dir, "with --backend cuda: folder for <gpu>-<date>/bench.json (default reports)")
      ->type_name("DIR");
  cmd->callback([args, &chosen]() {
    chosen = [args]() -> int {
      if (args->backend == "cuda") return bench_cuda(*args);
      if (!args->backend.empty()) throw input_error(fmt::format("--backend: unknown backend '{}' (known: cuda)", args->backend));
      if (args->kernels) throw input_error("--kernels times the GPU's kernels: plan bench --backend cuda --kernels");
      if (!args->planner) throw input_error("say what to measure: plan bench --planner");
      const sweep_space space = bench_space();
      const std::uint64_t total = space.size();

      // One core: evaluate every configuration, keep a checksum so nothing is optimized away. Three passes:
      // the fastest is the least disturbed by whatever else the machine runs; the median is printed beside it.
      std::array<double, 3> passes{};
      std::uint64_t checksum = 0, fitting = 0;
      double step_seconds_sum = 0;  // the times too: the reuse check below compares both
      for (double& seconds : passes) {
        const auto t0 = std::chrono::steady_clock::now();
        checksum = 0, fitting = 0, step_seconds_sum = 0;
        plan_reuse reuse;  // as a sweep evaluates: consecutive accumulations share the inventory
        for (std::uint64_t k = 0; k < total; ++k) {
          const sweep_result r = evaluate_point(space.at(k), &reuse);
          if (r.plan) checksum += r.plan->peak_bytes, fitting += r.plan->fits, step_seconds_sum += r.plan->time.step_seconds;
        }
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      std::sort(passes.begin(), passes.end());
      const double one_core = passes[0];
      fmt::print("planner, 1 core: {} configurations in {:.3f} s = {} configurations/s ({:.2f} us each; {} fit; checksum {}); "
                 "best of 3 passes, median {:.3f} s = {}/s\n",
                 grouped(total), one_core, grouped(static_cast<std::uint64_t>(total / one_core)), one_core / total * 1e6,
                 grouped(fitting), checksum % 1000003, passes[1], grouped(static_cast<std::uint64_t>(total / passes[1])));

      // The same configurations each built from nothing (as `plan search` and single plans are): what the
      // reuse across accumulation counts (planner/evaluate/plan.hpp, plan_reuse) gains, and a check that it changes
      // no result.
      const auto tc = std::chrono::steady_clock::now();
      std::uint64_t cold_checksum = 0;
      double cold_seconds_sum = 0;
      for (std::uint64_t k = 0; k < total; ++k) {
        const sweep_result r = evaluate_point(space.at(k));
        if (r.plan) cold_checksum += r.plan->peak_bytes, cold_seconds_sum += r.plan->time.step_seconds;
      }
      const double cold = std::chrono::duration<double>(std::chrono::steady_clock::now() - tc).count();
      fmt::print("planner, 1 core, no reuse between configurations: {} configurations/s ({:.2f} us each; checksum {})\n",
                 grouped(static_cast<std::uint64_t>(total / cold)), cold / total * 1e6, cold_checksum % 1000003);
      if (cold_checksum != checksum || cold_seconds_sum != step_seconds_sum) throw std::runtime_error("the reused and the rebuilt plans differ: a bug in plan_reuse");

      // As plan sweep evaluates by default: the allocator replay for every row whose stack's allocator is replayed
      // (replays_allocator), and for a row that does not fit the bisection for the least memory it needs
      // (planner/evaluate/plan.hpp, apply_allocator_replay). A strided sample of 2,000 rows, each evaluated as
      // evaluate_point(k, nullptr, true) does, the replay timed apart; --seconds stops it early.
      {
        const std::uint64_t stride = std::max<std::uint64_t>(1, total / 2000);
        std::uint64_t sampled = 0, replayed = 0;
        double replay_seconds = 0;
        const replay_counters before = thread_replay_counters();
        program_cache programs;  // as a sweep's worker keeps them (planner/allocator/program_cache.hpp)
        const auto tr = std::chrono::steady_clock::now();
        auto elapsed = [&tr] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - tr).count(); };
        for (std::uint64_t k = 0; k < total && (args->seconds <= 0 || elapsed() < args->seconds); k += stride) {
          const sweep_space::point p = space.at(k);
          sweep_result r = evaluate_point(p);
          ++sampled;
          if (!r.plan) continue;
          const auto t0 = std::chrono::steady_clock::now();
          apply_allocator_replay(*r.plan, p.model->facts, p.gpu->spec.memory_bytes, nullptr, &programs);
          replay_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          replayed += r.plan->allocator.has_value();
        }
        const double seconds = elapsed();
        const replay_counters& after = thread_replay_counters();
        const std::uint64_t replays = after.replays - before.replays, events = after.events_replayed - before.events_replayed;
        const std::uint64_t skipped = after.events_skipped - before.events_skipped;
        const std::uint64_t recalled = after.replays_recalled - before.replays_recalled;
        const double per_row = replayed ? replay_seconds / replayed : 0.0;
        fmt::print("planner with the allocator replay (plan sweep's default), 1 core: {} configurations/s ({} of a "
                   "sample of {} replayed in {:.2f} s{})\n",
                   grouped(static_cast<std::uint64_t>(sampled / seconds)), grouped(replayed), grouped(sampled), seconds,
                   sampled * stride < total ? ", stopped by --seconds" : "");
        fmt::print("allocator replay alone: {} replayed configurations/s ({:.0f} us each, schedule built and compiled "
                   "included; {:.1f} replays each with the bisection, {:.1f} more recalled from an equal replay), {} "
                   "events each ({} more left out by the fixed point): {:.0f} ns per event replayed; {} programs "
                   "shared, {} of the rest resized from an earlier schedule ({} of those refilled, not compiled)\n",
                   grouped(static_cast<std::uint64_t>(per_row > 0 ? 1 / per_row : 0)), per_row * 1e6,
                   replayed ? static_cast<double>(replays) / replayed : 0.0,
                   replayed ? static_cast<double>(recalled) / replayed : 0.0, grouped(replayed ? events / replayed : 0),
                   grouped(replayed ? skipped / replayed : 0), events ? replay_seconds / events * 1e9 : 0.0,
                   grouped(programs.hits()), grouped(programs.structures_shared()), grouped(programs.programs_refilled()));
        // The allocator replay's own targets: a replayed configuration in at most 0.5 ms on one core, an event in
        // at most 200 ns on average.
        const double replay_rate = per_row > 0 ? 1 / per_row : 0.0, event_ns = events ? replay_seconds / events * 1e9 : 0.0;
        fmt::print("targets: 2,000 replayed configurations/s on 1 core: {}; 200 ns per event replayed: {}\n",
                   replay_rate >= 2000 ? "met" : "NOT met", events && event_ns <= 200 ? "met" : "NOT met");
      }

      // As plan sweep runs with the replay on every core: a slice of the space written to CSV, each model on all
      // five GPUs over every sequence, micro-batch and accumulation (the rows a sweep's GPUs share: planner/search/
      // sweep_runner.hpp), one precision, optimizer, attention and dropout a model, turned so that the five models
      // cover each value; from its rate, how long the whole million would take (measured: docs/allocator-speed.md).
      {
        const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
        std::uint64_t rows = 0, models_done = 0;
        double seconds = 0;
        for (std::size_t m = 0; m < space.models.size() && (args->seconds <= 0 || models_done == 0 || seconds < args->seconds); ++m) {
          sweep_space slice = space;
          slice.models = {space.models[m]};
          slice.precisions = {space.precisions[m % space.precisions.size()]};
          slice.optimizers = {space.optimizers[m / 2 % space.optimizers.size()]};
          slice.attentions = {space.attentions[(m + m / 3) % space.attentions.size()]};
          slice.dropouts = {space.dropouts[m % space.dropouts.size()]};
          std::FILE* out = std::tmpfile();  // unlinked as it is made: an interrupted bench leaves nothing behind
          if (!out) throw input_error("cannot make a temporary file for the replayed sweep");
          const sweep_stats stats = run_sweep(slice, sweep_format::csv, out, threads, false, true);
          std::fclose(out);
          rows += stats.rows, seconds += stats.seconds, ++models_done;
        }
        const double million_minutes = rows ? seconds / static_cast<double>(rows) * 1e6 / 60 : 0.0;
        fmt::print("sweep with the allocator replay to CSV, {} threads: {} rows of the space ({} of {} models, each on every GPU, "
                   "one precision, optimizer, attention and dropout each) in {:.2f} s = {} rows/s: a million such rows in "
                   "{:.1f} min{}\n",
                   threads, grouped(rows), models_done, space.models.size(), seconds,
                   grouped(static_cast<std::uint64_t>(seconds > 0 ? rows / seconds : 0)), million_minutes,
                   models_done < space.models.size() ? " (stopped by --seconds: the models first in the list are the smallest)" : "");
        fmt::print("targets: a million-row sweep with the replay in under 10 min on {} threads: {}\n", threads,
                   million_minutes < 10 ? "met" : "NOT met");
      }

      // Every core, evaluation only (each thread takes every threads-th configuration).
      const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
      const auto tp = std::chrono::steady_clock::now();
      std::vector<std::thread> pool;
      std::vector<std::uint64_t> sums(cores, 0);
      for (unsigned w = 0; w < cores; ++w)
        pool.emplace_back([&, w] {
          plan_reuse reuse;
          std::uint64_t sum = 0;  // summed here: neighbouring sums[] share a cache line
          for (std::uint64_t k = w; k < total; k += cores) {
            const sweep_result r = evaluate_point(space.at(k), &reuse);
            if (r.plan) sum += r.plan->peak_bytes;
          }
          sums[w] = sum;
        });
      for (std::thread& t : pool) t.join();
      const double all_cores = std::chrono::duration<double>(std::chrono::steady_clock::now() - tp).count();
      fmt::print("planner, {} cores: {} configurations in {:.3f} s = {} configurations/s\n", cores, grouped(total), all_cores,
                 grouped(static_cast<std::uint64_t>(total / all_cores)));

      // The same sweep written to CSV on every core, into a file without a name (tmpfile: unlinked as it is
      // made), so that an interrupted bench leaves nothing behind.
      std::FILE* out = std::tmpfile();
      if (!out) throw input_error("cannot make a temporary file for the CSV sweep");
      const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
      const auto t1 = std::chrono::steady_clock::now();
      const sweep_stats stats = run_sweep(space, sweep_format::csv, out, threads, false, false);
      std::fclose(out);
      const double sweep_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
      fmt::print("sweep to CSV, {} threads: {} rows, {:.1f} MB in {:.3f} s = {} configurations/s\n", threads,
                 grouped(stats.rows), stats.bytes_written / 1e6, sweep_seconds,
                 grouped(static_cast<std::uint64_t>(stats.rows / sweep_seconds)));
      fmt::print("targets: 1,000,000 configurations/s evaluated: {} on 1 core, {} on {} cores; "
                 "1M sweep written to CSV in under 5 s: {}\n",
                 total / one_core >= 1e6 ? "met" : "NOT met", total / all_cores >= 1e6 ? "met" : "NOT met", cores,
                 sweep_seconds < 5 ? "met" : "NOT met");
      // The fast approximation's error where the replay is the answer: on what was measured.
      print_estimate_error(committed_measurement_folders());
      return 0;
    };
  });
}

}  // namespace trainplan::cli
