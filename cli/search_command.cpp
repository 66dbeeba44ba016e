// `plan search`: the configurations that fit, best first for a target batch, with the Pareto front of
// peak memory against tokens/s and what breaks the budget for the rest. Exit 0 when something fits. The search
// and its listing are planner/search's (search.hpp, search_listing.hpp); here the options and the tables.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdio>

#include "planner/profiles/registry.hpp"
#include "cli/number_option.hpp"
#include "cli/commands.hpp"
#include "cli/format.hpp"
#include "cli/model_run_options.hpp"
#include "cli/sweep_space_options.hpp"
#include "planner/util/input_error.hpp"
#include "planner/search/levers.hpp"
#include "planner/util/quantity_parse.hpp"
#include "planner/search/search.hpp"
#include "planner/search/search_listing.hpp"
#include "planner/search/layout_search.hpp"

namespace trainplan::cli {
namespace {

struct search_args {
  model_run_args model_run;
  std::string tokens_per_step = "4M";
  double margin = -1;
  std::string top_text = "5";  // --top, parsed strictly (at least 1) into top
  std::size_t top = 5;
  bool json = false;
  std::string levers;  // --levers: widen the search along these (planner/search/levers.hpp)
  bool layouts = false;  // --layouts: search the GPU layout (planner/search/layout_search.hpp)
  unsigned threads = 0;  // --threads: worker threads (0: every core)
};

// The layout search's mode: asked for, or several GPUs given with no layout of their own.
bool wants_layout_search(const search_args& a) {
  if (a.layouts) return true;
  const model_run_args& m = a.model_run;
  const bool one_count = !m.gpus.empty() && m.gpus.find_first_of(",:") == std::string::npos && m.gpus != "1";
  return one_count && m.tp.empty() && m.cp.empty() && m.pp.empty() && m.zero.empty() && m.fsdp.empty() && m.ep.empty() && a.levers.empty();
}

std::string layout_label(const run_config& r) {
  std::string label = fmt::format("{:<9} DP {:>4} TP {} PP {:>2}", profile_of(r).name, r.data_parallel(), r.tp, r.pp);
  if (r.cp > 1) label += fmt::format(" CP {}", r.cp);
  if (r.ep > 1) label += fmt::format(" EP {}", r.ep);
  label += fmt::format(" ZeRO-{} {:<9} mb {:>2} x {:>4}", r.zero, recompute_name(r.recompute), r.micro_batch, r.grad_accum);
  return label;
}

std::string dominant_text(const layout_row& row) {
  if (row.dominant == step_share::communication)
    return fmt::format("{} communication", comm_group_name(row.dominant_group));
  return std::string(step_share_name(row.dominant));
}

nlohmann::json layout_json(const layout_row& row) {
  const run_config& r = row.run;
  nlohmann::json groups = nlohmann::json::object();
  for (std::size_t g = 0; g < comm_group_count; ++g)
    if (row.exposed_by_group[g] > 0) groups[std::string(comm_group_name(static_cast<comm_group>(g)))] = row.exposed_by_group[g];
  return {{"framework", profile_of(r).name}, {"gpus", r.gpus}, {"data_parallel", r.data_parallel()}, {"tp", r.tp},
          {"pp", r.pp}, {"ep", r.ep}, {"zero", r.zero}, {"sequence_parallel", r.sequence_parallel},
          {"recompute", recompute_name(r.recompute)}, {"precision", precision_name(r.precision)},
          {"micro_batch", r.micro_batch}, {"grad_accum", r.grad_accum}, {"peak_bytes", row.peak_bytes},
          {"budget_bytes", row.budget_bytes}, {"fits", row.fits}, {"tokens_per_second", row.tokens_per_second},
          {"mfu", row.mfu}, {"step_seconds", row.step_seconds}, {"communication_seconds", row.communication_seconds},
          {"exposed_communication_seconds", row.exposed_communication_seconds}, {"exposed_by_group", groups},
          {"dominant", dominant_text(row)}};
}

// `plan search --gpus N`: the layouts ranked. Exit 0 when one fits, 1 when none does.
int run_layout_search(const search_args& a, bool margin_given) {
  // The micro-batch, recomputation and accumulation are what the search chooses: the run takes the rest.
  model_run_args fixed = a.model_run;
  fixed.micro_batch = "1", fixed.recompute.clear(), fixed.grad_accum.clear(), fixed.global_batch.clear();
  resolved_run r = resolve_model_run(fixed);
  layout_search_options o;
  o.target_tokens_per_step = parse_binary_count(a.tokens_per_step, "--tokens-per-step");
  if (margin_given && !(a.margin >= 0 && a.margin < 1)) throw input_error("--margin must be a fraction in [0, 1)");
  o.margin = margin_given ? a.margin : r.calib.safety_margin_fraction;
  if (a.model_run.framework_given) {
    o.stacks.push_back(&profile_of(r.run));
  } else {
    for (const stack_profile* p : all_profiles())
      if (p != &harness_profile()) o.stacks.push_back(p);
  }
  const bool show_progress = !a.json && isatty(fileno(stderr));
  o.progress = [show_progress, last = std::uint64_t(0)](std::uint64_t done, std::uint64_t total) mutable {
    if (!show_progress || total < 200 || (done != total && done - last < total / 20)) return;
    last = done;
    fmt::print(stderr, "\r  {} of {} layouts evaluated", done, total);
    if (done == total) fmt::print(stderr, "\n");
  };
  const layout_search_result res = search_layouts(r.model, r.run, r.gpu, r.calib, o);
  if (res.evaluated > 0 && res.invalid == res.evaluated) throw input_error(res.first_invalid_reason);
  const std::size_t shown = std::min(a.top, res.fitting.size());
  if (a.json) {
    nlohmann::json j;
    j["gpus"] = r.run.gpus;
    j["cluster"] = r.gpu.cluster ? nlohmann::json(r.gpu.cluster->name) : nlohmann::json();
    j["tokens_per_step"] = o.target_tokens_per_step;
    j["margin"] = o.margin;
    j["evaluated"] = res.evaluated;
    j["invalid"] = res.invalid;
    j["unreachable"] = res.unreachable;
    j["fitting"] = res.fitting.size();
    j["best"] = nlohmann::json::array();
    for (std::size_t i = 0; i < shown; ++i) j["best"].push_back(layout_json(res.fitting[i]));
    j["closest_failing"] = res.failing.empty() ? nlohmann::json() : layout_json(res.failing.front());
    fmt::print("{}\n", j.dump(2));
    return res.fitting.empty() ? 1 : 0;
  }
  fmt::print("plan search: layouts of {} on {} {}s{}, {} tokens per step, {}% of memory kept free\n", r.model.name,
             r.run.gpus, r.gpu.name,
             r.gpu.cluster ? fmt::format(" ({} nodes of {})", (r.run.gpus + r.gpu.cluster->gpus_per_node - 1) / r.gpu.cluster->gpus_per_node,
                                         r.gpu.cluster->name)
                           : std::string(),
             grouped(o.target_tokens_per_step), 100.0 * o.margin);
  fmt::print("Evaluated {} layouts: {} fit, {} over the budget, {} a stack cannot run; {} more cannot split the batch "
             "exactly.\n\n",
             res.evaluated, res.fitting.size(), res.failing.size(), res.invalid, res.unreachable);
  if (!res.fitting.empty()) {
    fmt::print("Best by predicted tokens/s (communication: collectives in the step / what the step waits for):\n");
    fmt::print("  {:>2}  {:<60} {:>10} {:>12} {:>6} {:>9} {:>19}  {}\n", "#", "layout", "peak", "tokens/s", "MFU", "step",
               "communication", "largest share");
    for (std::size_t i = 0; i < shown; ++i) {
      const layout_row& row = res.fitting[i];
      fmt::print("  {:>2}  {:<60} {:>10} {:>12} {:>6} {:>9} {:>9} / {:>7}  {}\n", i + 1, layout_label(row.run),
                 gib(row.peak_bytes), grouped_rate(row.tokens_per_second), percent(row.mfu), duration(row.step_seconds),
                 duration(row.communication_seconds), duration(row.exposed_communication_seconds), dominant_text(row));
    }
    const run_config& best = res.fitting.front().run;
    std::string flags = fmt::format("--framework {} --gpus {} --zero {} --recompute {} --micro-batch {} --grad-accum {}",
                                    profile_of(best).name, best.gpus, best.zero, recompute_name(best.recompute),
                                    best.micro_batch, best.grad_accum);
    if (best.tp > 1) flags += fmt::format(" --tp {}", best.tp);
    if (best.cp > 1) flags += fmt::format(" --cp {}", best.cp);
    if (best.pp > 1) flags += fmt::format(" --pp {}", best.pp);
    if (best.ep > 1) flags += fmt::format(" --ep {}", best.ep);
    if (best.sequence_parallel) flags += " --sequence-parallel";
    fmt::print("\n#1 as plan options: {}\n", flags);
  } else {
    fmt::print("Nothing fits.\n");
    if (!res.failing.empty())
      fmt::print("Closest: {} (peak {}, budget {}); more GPUs, offload or a shorter sequence would be next.\n",
                 layout_label(res.failing.front().run), gib(res.failing.front().peak_bytes),
                 gib(res.failing.front().budget_bytes));
  }
  fmt::print("Ranked within each stack's own calibration; a stack that is not named here was tried and refused the run "
             "or its layouts (--framework NAME searches one).\n");
  return res.fitting.empty() ? 1 : 0;
}

std::string config_label(const config_summary& s) {
  std::string label = fmt::format("seq {} x micro-batch {} x {} accumulation, recompute {}, {} attention, {}, {}", s.run.seq,
                                  s.run.micro_batch, s.run.grad_accum, recompute_name(s.run.recompute),
                                  attention_name(s.run.attention), precision_name(s.run.precision), optimizer_name(s.run.optimizer));
  // What only the levers vary, when it is not the default.
  if (s.run.optimizer_impl == optimizer_impl_kind::fused && profile_of(s.run).offers_optimizer_impl) label += " (fused)";
  if (s.run.finetune != finetune_kind::full) label += fmt::format(", {}", finetune_name(s.run.finetune));
  if (s.run.offload != offload_mode::none) label += fmt::format(", offload {}", offload_name(s.run.offload));
  if (s.run.gpus > 1) label += fmt::format(", {} GPUs ZeRO-{}", s.run.gpus, s.run.zero);
  if (s.run.expandable_segments && profile_of(s.run).offers_expandable_segments) label += ", expandable segments";
  return label;
}

// A listed run's changes as flags, "(as given)" for none.
std::string flags_text(const std::vector<std::string>& changes) {
  std::string flags;
  for (const std::string& f : changes) flags += (flags.empty() ? "" : " ") + f;
  return flags.empty() ? "(as given)" : flags;
}

// Why the winner beats the runner-up, from the fields in which they differ.
std::string why_first(const config_summary& a, const config_summary* b) {
  std::string why = fmt::format("highest predicted tokens/s ({}), {} of the budget", grouped_rate(a.tokens_per_second),
                                percent(static_cast<double>(a.peak_bytes) / static_cast<double>(a.budget_bytes)));
  if (!b) return why + "; the only configuration that fits";
  const double gain = a.tokens_per_second / b->tokens_per_second - 1.0;
  const bool tie = std::abs(gain) < 1e-9;
  std::vector<std::string> reasons;
  if (a.run.recompute != b->run.recompute)
    reasons.push_back(tie ? fmt::format("recompute {} rather than {} (the same work here: flash attention already "
                                        "recomputes the attention core)",
                                        recompute_name(a.run.recompute), recompute_name(b->run.recompute))
                          : fmt::format("recompute {} redoes less work than {}", recompute_name(a.run.recompute),
                                        recompute_name(b->run.recompute)));
  if (a.run.attention != b->run.attention)
    reasons.push_back(fmt::format("{} attention instead of {}", attention_name(a.run.attention), attention_name(b->run.attention)));
  if (a.run.precision != b->run.precision)
    reasons.push_back(fmt::format("{} instead of {}", precision_name(a.run.precision), precision_name(b->run.precision)));
  if (a.run.micro_batch != b->run.micro_batch)
    reasons.push_back(fmt::format("micro-batch {} rather than {} ({})", a.run.micro_batch, b->run.micro_batch,
                                  a.run.micro_batch > b->run.micro_batch
                                      ? "fewer, larger GEMMs and kernels for the same tokens"
                                      : "less memory at the same predicted speed"));
  why += tie ? std::string("; ties with #2 on speed, preferred for") : fmt::format("; {:+.1f}% over #2", 100.0 * gain);
  if (!reasons.empty()) {
    why += ": ";
    for (std::size_t i = 0; i < reasons.size(); ++i) why += (i ? "; " : "") + reasons[i];
  }
  return why;
}

nlohmann::json summary_json(const listed_config& l, bool with_changes) {
  const config_summary& s = *l.summary;
  nlohmann::json j = {{"model", s.model->spec.name}, {"gpu", s.gpu->spec.name}, {"seq", s.run.seq}, {"micro_batch", s.run.micro_batch},
          {"grad_accum", s.run.grad_accum}, {"recompute", recompute_name(s.run.recompute)},
          {"attention", attention_name(s.run.attention)}, {"precision", precision_name(s.run.precision)},
          {"optimizer", optimizer_name(s.run.optimizer)}, {"peak_bytes", s.peak_bytes}, {"budget_bytes", s.budget_bytes},
          {"fits", s.fits}, {"tokens_per_second", s.tokens_per_second}, {"mfu", s.mfu},
          {"largest_component", category_name(s.largest)}, {"gpus", s.run.gpus}, {"zero", s.run.zero},
          {"offload", offload_name(s.run.offload)}, {"finetune", finetune_name(s.run.finetune)},
          {"optimizer_impl", optimizer_impl_name(s.run.optimizer_impl)}, {"expandable_segments", s.run.expandable_segments}};
  if (with_changes) {
    j["changes"] = flags_text(l.changes);
    j["cost"] = suggestion_cost_text(l.costs);
  }
  return j;
}

}  // namespace

void register_search_command(CLI::App& app, command_action& chosen) {
  auto args = std::make_shared<search_args>();
  args->model_run.micro_batch = "1:1024:x2";
  args->model_run.recompute = "none,selective,full";
  CLI::App* cmd = app.add_subcommand(
      "search", "find the configurations that fit, best tokens/s first, for a target batch (exit 0 if any fits)");
  add_model_run_options(*cmd, args->model_run);
  cmd->add_option("--tokens-per-step", args->tokens_per_step,
                  "target global batch in tokens; k, M are powers of 1024 (default 4M = 4,194,304)")
      ->type_name("TOKENS");
  CLI::Option* margin_opt = cmd->add_option("--margin", args->margin, "memory kept free, a fraction of the GPU (default: calibration, 0.05)")
      ->type_name("FRACTION")
      ->check(fraction_below_one("--margin"));
  cmd->add_option("--top", args->top_text, "how many of the best to list, at least 1 (default 5)")->type_name("N");
  cmd->add_flag("--json", args->json, "print one JSON object");
  cmd->add_option("--threads", args->threads, "worker threads, 1 to 1024 (default: every core); the same rows on any number")
      ->type_name("N")->check(whole_number("--threads", 1, 1024));
  cmd->add_flag("--layouts", args->layouts,
                "search the GPU layout for --gpus N: data x tensor x pipeline (x expert) parallelism, ZeRO stage, "
                "recomputation and micro-batch, tensor parallelism inside a node, over every stack unless --framework "
                "names one, keeping --cp (the default when --gpus N is given without --tp, --cp, --pp, --zero, --ep or "
                "--levers)");
  cmd->add_option("--levers", args->levers,
                  fmt::format("also search these levers, each labelled with its cost: precision, optimizer, "
                              "optimizer-impl, recompute, batch, attention, adapters, gpus (2..8 with ZeRO 1-3), offload, "
                              "ep (MoE), allocator ({}: expandable segments) (comma-separated)",
                              profiles_offering(&stack_profile::offers_expandable_segments)))
      ->type_name("LIST");
  cmd->footer("Searches micro-batch 1..1024 and recompute none/selective/full (none/full where the stack recomputes whole "
              "layers only) unless given; lists and ranges as in sweep.\n"
              "With --levers, the changes and their cost are relative to the first value of each option (the run as given).");

  CLI::Option* recompute_opt = cmd->get_option("--recompute");
  cmd->callback([args, margin_opt, recompute_opt, &chosen]() {
    args->top = static_cast<std::size_t>(std::min<std::uint64_t>(parse_integer(args->top_text, "--top", 1), 1u << 30));
    if (wants_layout_search(*args)) {
      chosen = [args, margin_given = margin_opt->count() > 0]() { return run_layout_search(*args, margin_given); };
      return;
    }
    // A stack that checkpoints whole layers (Hugging Face's) has no selective recomputation to try.
    if (recompute_opt->count() == 0 && !chosen_profile(args->model_run).offers_selective_recompute)
      args->model_run.recompute = "none,full";
    chosen = [args, margin_given = margin_opt->count() > 0]() -> int {
      sweep_space space = resolve_sweep_space(args->model_run);
      const run_config base = space.at(0).run;  // the run as given: each option's first value
      check_parallel_layout(base);  // a layout no GPU count splits is bad input, not "cannot split the batch"
      // The run as given must be one plan accepts (a sequence beyond the learned positions, experts that do not
      // split over the GPUs): bad input, exit 2 with plan's message, not "nothing fits".
      {
        std::string why;
        if (!summarize_config(space.models.front(), space.gpus.front(), base, 0.0, &why, replay_when::never))
          throw input_error(why);
      }
      const bool with_levers = !args->levers.empty();
      const unsigned levers = with_levers ? parse_levers(args->levers, "--levers") : 0u;
      if (with_levers) widen_by_levers(space, levers);
      const std::uint64_t target = parse_binary_count(args->tokens_per_step, "--tokens-per-step");
      // Given explicitly, --margin must be a finite fraction in [0, 1): NaN or -1 no longer fall back to 5%.
      if (margin_given && !(args->margin >= 0 && args->margin < 1))
        throw input_error("--margin must be a fraction in [0, 1)");
      const double margin = margin_given ? args->margin : space.gpus.front().calib.safety_margin_fraction;
      if (margin >= 1) throw input_error("--margin must be below 1");
      const search_result r = search_configs(space, target, margin, true, args->threads);
      // Nothing that could run: the options are wrong (exit 2, with the reason), not "nothing fits".
      if (r.evaluated > 0 && r.invalid == r.evaluated) throw input_error(r.first_invalid_reason);
      const search_listing listing = list_search(r, args->top, with_levers ? &base : nullptr);
      if (args->json) {
        nlohmann::json j;
        j["tokens_per_step"] = target;
        j["margin"] = margin;
        j["evaluated"] = r.evaluated;
        j["unreachable"] = r.unreachable;
        j["invalid"] = r.invalid;
        j["best"] = nlohmann::json::array();
        for (const listed_config& l : listing.best) j["best"].push_back(summary_json(l, with_levers));
        j["pareto"] = nlohmann::json::array();
        for (const listed_config& l : listing.pareto) j["pareto"].push_back(summary_json(l, with_levers));
        if (with_levers) {
          j["levers"] = lever_names(levers);
          j["by_change_set"] = nlohmann::json::array();
          for (const listed_config& l : listing.by_change_set) j["by_change_set"].push_back(summary_json(l, true));
        }
        j["failing_by_component"] = nlohmann::json::object();
        for (const failing_component& f : listing.failing)
          j["failing_by_component"][f.component] = {{"count", f.count}, {"smallest", summary_json(listed_config{f.closest, {}, cost_none}, false)}};
        fmt::print("{}\n", j.dump(2));
        return r.fitting.empty() ? 1 : 0;
      }

      std::string models, gpus;
      for (const auto& m : space.models) models += (models.empty() ? "" : ", ") + m.spec.name;
      for (const auto& g : space.gpus) gpus += (gpus.empty() ? "" : ", ") + g.spec.name;
      fmt::print("plan search: {} on {}, {} tokens per step, {}% of memory kept free\n", models, gpus, grouped(target),
                 100.0 * margin);
      fmt::print("Evaluated {} configurations: {} fit, {} over the budget, {} cannot run; {} more cannot split the batch "
                 "exactly.\n\n",
                 r.evaluated, r.fitting.size(), r.failing.size(), r.invalid, r.unreachable);
      if (!r.fitting.empty()) {
        fmt::print("Best by predicted tokens/s:\n  {:>2}  {:<16} {:<10} {:<80} {:>10} {:>9} {:>12} {:>7}\n", "#", "model", "gpu",
                   "configuration", "peak", "budget", "tokens/s", "MFU");
        for (std::size_t i = 0; i < listing.best.size(); ++i) {
          const config_summary& s = *listing.best[i].summary;
          fmt::print("  {:>2}  {:<16} {:<10} {:<80} {:>10} {:>9} {:>12} {:>7}\n", i + 1, s.model->spec.name, s.gpu->spec.name,
                     config_label(s), gib(s.peak_bytes), percent(static_cast<double>(s.peak_bytes) / s.budget_bytes),
                     grouped_rate(s.tokens_per_second), percent(s.mfu));
        }
        fmt::print("Why #1: {}.\n\n", why_first(r.fitting[0], r.fitting.size() > 1 ? &r.fitting[1] : nullptr));
        if (with_levers) {
          const std::vector<listed_config>& sets = listing.by_change_set;
          const std::size_t shown = std::min(std::max<std::size_t>(args->top, 16), sets.size());
          fmt::print("The fastest for each combination of changes to the run as given, ranked as the fit check ranks "
                     "its suggestions (cost, then fewest changes, then tokens/s); a combination that adds to a listed one only "
                     "when it beats it on both peak and tokens/s:\n  {:>2}  {:<64} {:>10} {:>12}  {:<12}  {}\n",
                     "#", "changes", "peak", "tokens/s", "micro-batch", "cost");
          for (std::size_t i = 0; i < shown; ++i)
            fmt::print("  {:>2}  {:<64} {:>10} {:>12}  {:<12}  {}\n", i + 1, flags_text(sets[i].changes),
                       gib(sets[i].summary->peak_bytes), grouped_rate(sets[i].summary->tokens_per_second),
                       sets[i].summary->run.micro_batch, suggestion_cost_text(sets[i].costs));
          if (shown < sets.size()) fmt::print("  ({} more; --json lists them all)\n", sets.size() - shown);
          fmt::print("\n");
        }
        fmt::print("Pareto front (no other fitting configuration has both a lower peak and more tokens/s):\n");
        for (const listed_config& l : listing.pareto) {
          const config_summary& s = *l.summary;
          fmt::print("  peak {:>10}  {:>12} tokens/s  {} on {}: {}{}\n", gib(s.peak_bytes),
                     grouped_rate(s.tokens_per_second), s.model->spec.name, s.gpu->spec.name,
                     config_label(s), with_levers ? " [" + suggestion_cost_text(l.costs) + "]" : "");
        }
        fmt::print("\n");
      } else {
        fmt::print("Nothing fits.\n");
        // The cheapest ways out, from the configuration that came closest: more GPUs of this kind with
        // ZeRO, offload, adapters (the fit check's suggestions).
        if (const std::optional<closest_failing> out = ways_out_of_closest(r)) {
          const config_summary& closest = *out->summary;
          const std::vector<fit_suggestion>& ways = out->ways;
          if (!ways.empty()) {
            fmt::print("Closest: {} on {}, {} (peak {}). What would make it fit:\n", closest.model->spec.name,
                       closest.gpu->spec.name, config_label(closest), gib(closest.peak_bytes));
            for (const fit_suggestion& w : ways) {
              std::string flags;
              for (const std::string& c : w.changes) flags += (flags.empty() ? "" : " ") + c;
              fmt::print("  {:<50} peak {:>10}, {} tokens/s ({})\n", flags, gib(w.peak_bytes),
                         grouped_rate(w.tokens_per_second), suggestion_cost_text(w.costs));
            }
          }
        }
        fmt::print("\n");
      }
      if (!listing.failing.empty()) {
        fmt::print("Over the budget, by the largest component at the peak:\n");
        for (const failing_component& f : listing.failing)
          fmt::print("  {:<18} {:>6} configurations; the closest: {} on {}, {} ({} {} of {} budget)\n", f.component, f.count,
                     f.closest->model->spec.name, f.closest->gpu->spec.name, config_label(*f.closest),
                     gib(f.closest->category_bytes[static_cast<int>(f.closest->largest)]), f.component,
                     gib(f.closest->budget_bytes));
      }
      return r.fitting.empty() ? 1 : 0;
    };
  });
}

}  // namespace trainplan::cli
