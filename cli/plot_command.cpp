// `plan plot KIND ... -o file.svg|png`: memory-vs-seq, recompute, breakdown, time-breakdown, timeline, parity.
#include <fmt/format.h>

#include <cmath>

#include <algorithm>
#include <fstream>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "planner/profiles/registry.hpp"
#include "cli/commands.hpp"
#include "cli/format.hpp"
#include "cli/gnuplot.hpp"
#include "cli/output_file.hpp"
#include "cli/progress.hpp"
#include "cli/sweep_space_options.hpp"
#include "planner/util/input_error.hpp"
#include "planner/util/text_file.hpp"
#include "planner/memory/timeline.hpp"

namespace trainplan::cli {
namespace {

struct plot_args {
  model_run_args model_run;
  std::string kind, output, report;
  std::vector<std::string> reports;
};

constexpr double gib_per_byte = 1.0 / (1024.0 * 1024.0 * 1024.0);
constexpr std::uint64_t max_chart_points = 2000;  // memory-vs-seq and recompute: more is neither readable nor quick
const char* const palette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#bab0ac"};

// A readable byte unit for the largest value: (divisor, name).
std::pair<double, const char*> byte_unit(double max_bytes) {
  if (max_bytes >= 1024.0 * 1024 * 1024) return {1024.0 * 1024 * 1024, "GiB"};
  if (max_bytes >= 1024.0 * 1024) return {1024.0 * 1024, "MiB"};
  return {1024.0, "KiB"};
}

// A gnuplot string. Double-quoted, so that "\n" (written as the two characters) breaks the line. gnuplot runs
// the text between backquotes as a shell command wherever it meets them outside single quotes, so a model
// named by a file (--hf-config 'b`cmd`.json') or a --data-dir entry could run one: a backquote is written
// as its octal escape, which gnuplot reads as the character only after that substitution.
std::string quote(const std::string& s) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == 'n') out += "\\n", ++i;
    else if (s[i] == '`') out += "\\140";
    else if (s[i] == '"' || s[i] == '\\') out += '\\', out += s[i];
    else out += s[i];
  }
  return out + "\"";
}

std::string run_text(const run_config& r, bool with_seq) {
  return fmt::format("{}, {}, recompute {}, {} attention, micro-batch {}{}", precision_name(r.precision),
                     optimizer_name(r.optimizer), recompute_name(r.recompute), attention_name(r.attention), r.micro_batch,
                     with_seq ? fmt::format(", seq {}", r.seq) : "");
}

std::string seq_label(std::uint64_t seq) {
  if (seq >= 1024 && seq % 1024 == 0) return fmt::format("{}k", seq / 1024);
  return std::to_string(seq);
}

std::optional<plan_result> evaluate(const sweep_model& m, const sweep_gpu& g, const run_config& r, timeline_detail detail,
                                    std::string* why = nullptr) {
  plan_options o;
  o.detail = detail;
  o.facts = &m.facts;
  // Each point is plan's: where the allocator is replayed (replays_allocator) the peak is the caching allocator
  // replay's (a peak-only evaluation leaves it out unless asked, for sweeps that opt out of it).
  o.replay_at_peak = true;
  try {
    return evaluate_plan(m.spec, r, g.spec, g.calib, o);
  } catch (const input_error& e) {
    if (why) *why = e.what();
    return std::nullopt;  // e.g. beyond the model's learned positions: left out of the chart
  }
}

// A chart with no point at all would fail inside gnuplot ("logscaled axis must have positive range"): say why.
void require_points(std::size_t points, std::string_view kind, const std::string& why) {
  if (points == 0) throw input_error(fmt::format("plot {}: no configuration can run: {}", kind, why));
}

void require_single(const sweep_space& s, bool models_too) {
  const bool single_run = s.precisions.size() == 1 && s.grad_dtypes.size() == 1 && s.optimizers.size() == 1 &&
                          s.recomputes.size() == 1 && s.attentions.size() == 1 && s.dropouts.size() <= 1 &&
                          s.micro_batches.size() == 1 && s.grad_accums.size() == 1 && s.global_batches.size() <= 1;
  if (s.gpus.size() != 1) throw input_error("plot: give one --gpu");
  if (!single_run) throw input_error("plot: give one value for each run option except those the chart varies");
  if (models_too && s.models.size() != 1) throw input_error("plot: give one model");
}

gnuplot_job memory_vs_seq(const sweep_space& space, progress& bar) {
  require_single(space, false);
  const sweep_gpu& g = space.gpus.front();
  const double cap = static_cast<double>(g.spec.memory_bytes) * gib_per_byte;
  gnuplot_job job;
  const run_config base = space.at(0).run;
  std::string script = fmt::format(
      "set title {}\nset ylabel 'GiB at the peak'\nset xlabel 'sequence length (tokens)'\nset grid ytics\n"
      "set key top left box opaque\nset yrange [0:*]\nCAP = {:.4f}\n",
      quote(fmt::format("Memory at the peak vs sequence length on {}\\n{{/*0.8 {}}}", g.spec.description, run_text(base, false))),
      cap);
  std::size_t points = 0;
  std::string why;
  if (space.models.size() == 1) {
    std::string data = "# seq model_state activations logits activation_grads overhead\n";
    for (std::uint64_t seq : space.seqs) {
      run_config r = base;
      r.seq = seq;
      const auto p = evaluate(space.models.front(), g, r, timeline_detail::peak, &why);
      bar.advance();
      if (!p) continue;
      ++points;
      data += fmt::format("{} {:.6f} {:.6f} {:.6f} {:.6f} {:.6f}\n", seq_label(seq), p->model_state_bytes() * gib_per_byte,
                          p->category_bytes(tensor_category::activations) * gib_per_byte,
                          p->category_bytes(tensor_category::logits) * gib_per_byte,
                          p->category_bytes(tensor_category::activation_grads) * gib_per_byte, p->overhead.total() * gib_per_byte);
    }
    require_points(points, "memory-vs-seq", why);
    job.data_files.emplace_back("memory.dat", data);
    script = fmt::format("{}set title {}\n", script,
                         quote(fmt::format("{}: memory at the peak vs sequence length on {}\\n{{/*0.8 {}}}", space.models.front().spec.name,
                                           g.spec.name, run_text(base, false))));
    script += fmt::format(
        "set style data histograms\nset style histogram rowstacked\nset style fill solid 0.85 border rgb 'white'\n"
        "set boxwidth 0.75\n"
        "plot 'memory.dat' using 2:xtic(1) title 'weights, master, gradients, optimizer' lc rgb '{}', \\\n"
        "  '' using 3 title 'activations' lc rgb '{}', '' using 4 title 'logits and loss' lc rgb '{}', \\\n"
        "  '' using 5 title 'activation gradients' lc rgb '{}', '' using 6 title 'runtime overhead' lc rgb '{}', \\\n"
        "  '' using 0:(CAP) with lines lw 2 dt 2 lc rgb 'black' title 'GPU memory ({:.1f} GiB)'\n",
        palette[0], palette[1], palette[2], palette[3], palette[7], cap);
  } else {
    std::string plot = "plot ";
    for (std::size_t i = 0; i < space.models.size(); ++i) {
      std::string data;
      for (std::uint64_t seq : space.seqs) {
        run_config r = base;
        r.seq = seq;
        const auto p = evaluate(space.models[i], g, r, timeline_detail::peak, &why);
        bar.advance();
        if (p) {
          ++points;
          data += fmt::format("{} {:.6f}\n", seq, p->peak_bytes * gib_per_byte);
        }
      }
      const std::string file = fmt::format("model{}.dat", i);
      job.data_files.emplace_back(file, data);
      plot += fmt::format("{}'{}' using 1:2 with linespoints lw 2 pt 7 lc rgb '{}' title {}", i ? ", \\\n  " : "", file,
                          palette[i % 7], quote(space.models[i].spec.name));
    }
    require_points(points, "memory-vs-seq", why);
    script += "set logscale x 2\nset format x '%.0f'\n" + plot +
              fmt::format(", \\\n  CAP with lines lw 2 dt 2 lc rgb 'black' title 'GPU memory ({:.1f} GiB)'\n", cap);
  }
  job.script = script;
  return job;
}

gnuplot_job recompute_chart(const sweep_space& space, progress& bar) {
  require_single(space, true);
  const sweep_gpu& g = space.gpus.front();
  const run_config base = space.at(0).run;
  std::string data = "# seq none selective full\n";
  std::size_t points = 0;
  std::string why;
  for (std::uint64_t seq : space.seqs) {
    std::string row = seq_label(seq);
    bool ok = true;
    for (recompute_mode rc : {recompute_mode::none, recompute_mode::selective, recompute_mode::full}) {
      run_config r = base;
      r.seq = seq;
      r.recompute = rc;
      // A stack that checkpoints whole layers (Hugging Face's) has no selective mode: drawn as a gap.
      if (rc == recompute_mode::selective && !profile_of(r).offers_selective_recompute) {
        row += " NaN";
        continue;
      }
      const auto p = evaluate(space.models.front(), g, r, timeline_detail::peak, &why);
      bar.advance();
      if (!p) ok = false;
      else row += fmt::format(" {:.6f}", p->peak_bytes * gib_per_byte);
    }
    if (ok) data += row + "\n", ++points;
  }
  require_points(points, "recompute", why);
  gnuplot_job job;
  job.data_files.emplace_back("recompute.dat", data);
  const double cap = static_cast<double>(g.spec.memory_bytes) * gib_per_byte;
  job.script = fmt::format(
      "set title {}\nset ylabel 'peak GiB'\nset xlabel 'sequence length (tokens)'\nset grid ytics\nset key top left box opaque\n"
      "set datafile missing 'NaN'\nset logscale y\nset yrange [1:*]\nset style data histograms\nset style histogram clustered gap 1\n"
      "set style fill solid 0.85 border rgb 'white'\nCAP = {:.4f}\n"
      "plot 'recompute.dat' using 2:xtic(1) title 'recompute none' lc rgb '{}', '' using 3 title 'selective' lc rgb '{}', \\\n"
      "  '' using 4 title 'full' lc rgb '{}', '' using 0:(CAP) with lines lw 2 dt 2 lc rgb 'black' title 'GPU memory ({:.1f} GiB)'\n",
      quote(fmt::format("{}: peak memory by recomputation mode on {} (log scale)\\n{{/*0.8 {}, {}, {} attention, micro-batch {}: "
                        "selective drops the s^2 attention core, full keeps only layer inputs}}",
                        space.models.front().spec.name, g.spec.name, precision_name(base.precision),
                        optimizer_name(base.optimizer), attention_name(base.attention), base.micro_batch)),
      cap, palette[2], palette[1], palette[0], cap);
  return job;
}

// The one configuration a breakdown chart draws: one model, GPU and --seq.
plan_result single_plan(const sweep_space& space, std::string_view kind) {
  require_single(space, true);
  if (space.seqs.size() != 1) throw input_error(fmt::format("plot {}: give one --seq", kind));
  std::string why;
  auto p = evaluate(space.models.front(), space.gpus.front(), space.at(0).run, timeline_detail::peak, &why);
  if (!p) throw input_error(fmt::format("plot {}: this configuration cannot run: {}", kind, why));
  return std::move(*p);
}

gnuplot_job breakdown_chart(const sweep_space& space) {
  const sweep_gpu& g = space.gpus.front();
  const run_config r = space.at(0).run;
  const plan_result p = single_plan(space, "breakdown");
  const std::pair<const char*, std::uint64_t> rows[] = {
      {"weights", p.category_bytes(tensor_category::weights)},
      {"master weights", p.category_bytes(tensor_category::master_weights)},
      {"gradients", p.category_bytes(tensor_category::gradients)},
      {"optimizer state", p.category_bytes(tensor_category::optimizer)},
      {"activations", p.category_bytes(tensor_category::activations)},
      {"logits and loss", p.category_bytes(tensor_category::logits)},
      {"activation gradients", p.category_bytes(tensor_category::activation_grads)},
      {"runtime overhead", p.overhead.total()}};
  std::string data;
  for (const auto& [label, bytes] : rows) data += fmt::format("\"{}\" {:.6f}\n", label, bytes * gib_per_byte);
  gnuplot_job job;
  job.data_files.emplace_back("breakdown.dat", data);
  job.script = fmt::format(
      "set title {}\nset ylabel 'GiB at the peak'\nset grid ytics\nset yrange [0:*]\nset style fill solid 0.85\n"
      "set boxwidth 0.65\nset xtics rotate by -25 nomirror\nset offsets 0.5,0.5,graph 0.12,0\nset key top right box opaque width 2\n"
      "plot 'breakdown.dat' using 0:2:xtic(1) with boxes lc rgb '{}' notitle, \\\n"
      "  '' using 0:2:(sprintf('%.2f', $2)) with labels offset 0,0.8 notitle, \\\n"
      "  {:.4f} with lines lw 2 dt 2 lc rgb 'black' title 'GPU memory'\n",
      quote(fmt::format("{} on {}: peak {:.2f} GiB of {:.2f} GiB, {}\\n{{/*0.8 {} at {}}}", space.models.front().spec.name,
                        g.spec.name, p.peak_bytes * gib_per_byte, g.spec.memory_bytes * gib_per_byte,
                        p.fits ? "fits" : "does not fit", run_text(r, true), phase_name(p.timeline.peak))),
      palette[0], g.spec.memory_bytes * gib_per_byte);
  return job;
}

// One step's time by op class (planner/time/roofline.hpp), in milliseconds.
gnuplot_job time_breakdown_chart(const sweep_space& space) {
  const sweep_gpu& g = space.gpus.front();
  const run_config r = space.at(0).run;
  const plan_result p = single_plan(space, "time-breakdown");
  std::string data;
  for (std::size_t c = 0; c < op_class_count; ++c)
    data += fmt::format("\"{}\" {:.6f}\n", op_class_name(static_cast<op_class>(c)), p.time.breakdown.seconds[c] * 1e3);
  gnuplot_job job;
  job.data_files.emplace_back("time.dat", data);
  job.script = fmt::format(
      "set title {}\nset ylabel 'ms per step'\nset grid ytics\nset yrange [0:*]\nset style fill solid 0.85\n"
      "set boxwidth 0.65\nset xtics rotate by -25 nomirror\nset offsets 0.5,0.5,graph 0.12,0\n"
      "plot 'time.dat' using 0:2:xtic(1) with boxes lc rgb '{}' notitle, \\\n"
      "  '' using 0:2:(sprintf('%.1f', $2)) with labels offset 0,0.8 notitle\n",
      quote(fmt::format("{} on {} ({} profile): step {:.1f} ms, {:.0f} tokens/s, MFU {:.1f}%\\n{{/*0.8 {}}}",
                        space.models.front().spec.name, g.spec.name, profile_of(r).name,
                        p.time.step_seconds * 1e3, p.time.tokens_per_second, 100 * p.time.mfu, run_text(r, true))),
      palette[1]);
  return job;
}

nlohmann::json read_report(const std::string& path) {
  try {
    nlohmann::json j = nlohmann::json::parse(read_text_file(path));
    if (!j.is_object() || !j.contains("predicted") || !j.contains("measured") || !j.contains("timeline"))
      throw input_error(fmt::format("{}: not a plan validate report (no predicted, measured or timeline)", path));
    return j;
  } catch (const nlohmann::json::exception& e) {  // syntax, and numbers out of range such as 1e400
    throw input_error(fmt::format("{}: not a valid report ({})", path, e.what()));
  }
}

gnuplot_job timeline_chart(const plot_args& args, const sweep_space* space) {
  std::vector<std::tuple<std::string, double, double>> rows;  // phase, predicted, measured (-1: none)
  std::string title;
  if (!args.report.empty()) {
    const nlohmann::json j = read_report(args.report);
    // get<std::uint64_t>() of 1e30 or -1.5 is a cast with an undefined result: counts must be JSON integers.
    auto count = [&](const nlohmann::json& v) {
      if (!v.is_number_unsigned())
        throw input_error(fmt::format("{}: not a valid report (seq, micro_batch and grad_accum must be integers)", args.report));
      return v.get<std::uint64_t>();
    };
    try {  // checked access (at): a missing or mistyped field is a message naming the report, never UB
      for (const auto& row : j.at("timeline"))
        rows.emplace_back(row.at("phase").get<std::string>(), row.at("predicted_bytes").get<double>(),
                          row.at("measured_bytes").get<double>());
      title = fmt::format("Memory timeline, predicted and measured ({} backend): {}, seq {} x micro-batch {} x {}",
                          j.at("backend").get<std::string>(), j.at("model").at("name").get<std::string>(),
                          count(j.at("run").at("seq")), count(j.at("run").at("micro_batch")),
                          count(j.at("run").at("grad_accum")));
    } catch (const nlohmann::json::exception& e) {
      throw input_error(fmt::format("{}: not a valid report ({})", args.report, e.what()));
    }
    if (rows.empty()) throw input_error(fmt::format("{}: the report's timeline is empty", args.report));
  } else {
    require_single(*space, true);
    if (space->seqs.size() != 1) throw input_error("plot timeline: give one --seq");
    const run_config r = space->at(0).run;
    std::string why;
    const auto p = evaluate(space->models.front(), space->gpus.front(), r, timeline_detail::every_event, &why);
    if (!p) throw input_error(fmt::format("plot timeline: this configuration cannot run: {}", why));
    for (const timeline_point& q : p->timeline.points)
      rows.emplace_back(describe_point(q, r.grad_accum), static_cast<double>(q.live_bytes), -1.0);
    title = fmt::format("Predicted memory timeline: {}, {}", space->models.front().spec.name, run_text(r, true));
  }
  double max_bytes = 1;
  for (const auto& [phase, pred, meas] : rows) max_bytes = std::max({max_bytes, pred, meas});
  const auto [div, unit] = byte_unit(max_bytes);
  std::string data, tics;
  std::string last_group;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& [phase, pred, meas] = rows[i];
    data += meas >= 0 ? fmt::format("{} {:.6f} {:.6f}\n", i, pred / div, meas / div) : fmt::format("{} {:.6f} ?\n", i, pred / div);
    // A tick where a step or micro-batch begins: the phase text before its last comma.
    const std::string group = phase.substr(0, phase.rfind(','));
    if (group != last_group && group.find("micro-batch") != std::string::npos) {
      tics += fmt::format("{}{} {}", tics.empty() ? "" : ", ", quote(group), i);
      last_group = group;
    }
  }
  gnuplot_job job;
  job.data_files.emplace_back("timeline.dat", data);
  const bool measured = std::get<2>(rows.front()) >= 0;
  job.script = fmt::format(
      "set title {}\nset ylabel 'live bytes ({})'\nset xlabel 'event (forward, loss, backward, optimizer, in order)'\n"
      "set grid\nset key bottom right box opaque\nset yrange [0:*]\nset rmargin 10\nset xtics ({}) rotate by -20 font ',9'\n"
      "plot 'timeline.dat' using 1:2 with steps lw 2 lc rgb '{}' title 'predicted'{}\n",
      quote(title), unit, tics, palette[0],
      measured ? fmt::format(", '' using 1:3 with points pt 7 ps 0.6 lc rgb '{}' title 'measured'", palette[2]) : "");
  return job;
}

gnuplot_job parity_chart(const plot_args& args) {
  if (args.reports.empty()) throw input_error("plot parity: give validation reports with --reports FILE...");
  std::vector<std::pair<double, double>> points;
  double tolerance = 0, max_bytes = 1;
  for (const std::string& path : args.reports) {
    const nlohmann::json j = read_report(path);
    double pred = 0, meas = 0;
    try {
      pred = j.at("predicted").at("peak_bytes").get<double>();
      meas = j.at("measured").at("peak_bytes").get<double>();
      tolerance = std::max(tolerance, j.value("tolerance_pct", 0.5));
    } catch (const nlohmann::json::exception& e) {
      throw input_error(fmt::format("{}: not a valid report ({})", path, e.what()));
    }
    if (!(pred >= 0 && meas >= 0 && std::isfinite(tolerance) && tolerance >= 0))
      throw input_error(fmt::format("{}: peak bytes and tolerance must be non-negative numbers", path));
    points.emplace_back(pred, meas);
    max_bytes = std::max({max_bytes, pred, meas});
  }
  const auto [div, unit] = byte_unit(max_bytes);
  std::string data;
  for (const auto& [pred, meas] : points) data += fmt::format("{:.6f} {:.6f}\n", pred / div, meas / div);
  gnuplot_job job;
  job.data_files.emplace_back("parity.dat", data);
  const double t = tolerance / 100.0;
  job.script = fmt::format(
      "set title {}\nset xlabel 'predicted peak ({})'\nset ylabel 'measured peak ({})'\nset grid\nset key top left box opaque\n"
      "set xrange [0:*]\nset yrange [0:*]\nset size ratio -1\n"
      "plot x*(1+{}) with filledcurves y1=0 fs transparent solid 0.15 lc rgb '{}' notitle, \\\n"
      "  x*(1-{}) with filledcurves y1=0 fs solid 1.0 lc rgb 'white' notitle, \\\n"
      "  x with lines lw 1 dt 2 lc rgb 'black' title 'measured = predicted', \\\n"
      "  'parity.dat' using 1:2 with points pt 7 ps 1.2 lc rgb '{}' title {}\n",
      quote(fmt::format("Predicted vs measured peak memory, {} validation run{} (band: +/-{:.2g}%)", points.size(),
                        points.size() == 1 ? "" : "s", tolerance)),
      unit, unit, t, palette[3], t, palette[2], quote("runs"));
  return job;
}

}  // namespace

void register_plot_command(CLI::App& app, command_action& chosen) {
  auto args = std::make_shared<plot_args>();
  CLI::App* cmd = app.add_subcommand("plot", "charts as SVG or PNG (needs gnuplot): memory-vs-seq, recompute, breakdown, "
                                             "time-breakdown, timeline, parity");
  cmd->add_option("kind", args->kind, "memory-vs-seq | recompute | breakdown | time-breakdown | timeline | parity")->required()->type_name("KIND");
  add_model_run_options(*cmd, args->model_run);
  cmd->add_option("-o,--output", args->output, "the chart: a .svg or .png file")->required()->type_name("FILE");
  cmd->add_option("--report", args->report, "timeline: a plan validate JSON report to draw measured next to predicted")
      ->type_name("FILE");
  cmd->add_option("--reports", args->reports, "parity: plan validate JSON reports")->type_name("FILE...");
  cmd->footer("memory-vs-seq and recompute take a --seq range (default 256:128k:x2); memory-vs-seq draws one model "
              "stacked by component, or several as lines.");
  cmd->callback([args, &chosen]() {
    chosen = [args]() -> int {
      const std::string& k = args->kind;
      if (k != "memory-vs-seq" && k != "recompute" && k != "breakdown" && k != "time-breakdown" && k != "timeline" &&
          k != "parity")
        throw input_error(fmt::format(
            "plot: unknown kind '{}' (known: memory-vs-seq, recompute, breakdown, time-breakdown, timeline, parity)", k));
      const bool from_reports = k == "parity" || (k == "timeline" && !args->report.empty());
      const bool over_seq = k == "memory-vs-seq" || k == "recompute";
      std::optional<sweep_space> space;
      std::uint64_t points = 0;  // the configurations a chart over --seq evaluates
      if (!from_reports) {
        model_run_args a = args->model_run;
        // One sequence: as plan takes it (4096, capped by the model's learned positions: 1024 for GPT-2).
        if (a.seq.empty() && over_seq) a.seq = "256:128k:x2";
        space = resolve_sweep_space(a);
        // Each point replays the allocator (a millisecond, up to 15 for one that does not fit): 100,000 sequence
        // lengths ran past ten minutes, for a chart nobody could read.
        points = space->seqs.size() * (k == "recompute" ? 3 : space->models.size());
        const std::uint64_t drawn = space->seqs.size() * (k == "recompute" ? 1 : space->models.size());
        if (over_seq && drawn > max_chart_points)
          throw input_error(fmt::format("plot {}: --seq gives {} sequence lengths{}, more than the {} points a chart "
                                        "draws: take a larger step, such as 1k:128k:+1k or 256:128k:x2",
                                        k, grouped(space->seqs.size()),
                                        drawn == space->seqs.size() ? std::string()
                                                                    : fmt::format(" x {} models", space->models.size()),
                                        grouped(max_chart_points)));
      }
      // The chart's path and gnuplot are checked before any point is computed (a folder, a read-only file), and
      // after the inputs are read, so that the output is never one of them (output_file.hpp).
      check_chart_output(args->output);
      gnuplot_job job;
      std::optional<output_file> out;
      if (k == "parity") {
        job = parity_chart(*args);
      } else if (from_reports) {
        job = timeline_chart(*args, nullptr);
      } else {
        out.emplace(args->output);
        progress bar(fmt::format("plan plot {}", k), over_seq ? points : 0, "points");
        if (k == "memory-vs-seq") job = memory_vs_seq(*space, bar);
        else if (k == "recompute") job = recompute_chart(*space, bar);
        else if (k == "breakdown") job = breakdown_chart(*space);
        else if (k == "time-breakdown") job = time_breakdown_chart(*space);
        else job = timeline_chart(*args, &*space);
      }
      job.output = args->output;
      if (!out) out.emplace(args->output);
      render_gnuplot(job, *out);
      fmt::print(stderr, "wrote {}\n", args->output);
      return 0;
    };
  });
}

}  // namespace trainplan::cli
