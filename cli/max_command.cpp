// `plan max seq|micro-batch|params`: the largest value that still fits the GPU with everything else fixed. The
// search is planner/search/max_search.hpp's; here the options, and the answer printed.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/format.hpp"
#include "cli/model_run_options.hpp"
#include "cli/number_option.hpp"
#include "cli/progress.hpp"
#include "planner/model/model_facts.hpp"
#include "planner/search/levers.hpp"
#include "planner/search/max_search.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan::cli {
namespace {

struct max_args {
  model_run_args model_run;
  std::string what;
  double margin = 0;
  bool json = false;
  std::string levers;  // --levers: also the maximum with each combination of these
  std::size_t top = 8;
};

// "2,752, 2,832-2,912": values on a grid of `stride`, runs of neighbours as ranges.
std::string grid_ranges(const std::vector<std::uint64_t>& values, std::uint64_t stride) {
  std::string out;
  for (std::size_t i = 0; i < values.size();) {
    std::size_t j = i;
    while (j + 1 < values.size() && values[j + 1] == values[j] + stride) ++j;
    out += fmt::format("{}{}", out.empty() ? "" : ", ", grouped(values[i]));
    if (j > i) out += fmt::format("{}{}", j == i + 1 ? ", " : "-", grouped(values[j]));
    i = j + 1;
  }
  return out;
}

}  // namespace

void register_max_command(CLI::App& app, command_action& chosen) {
  auto args = std::make_shared<max_args>();
  CLI::App* cmd = app.add_subcommand(
      "max", "the longest sequence, largest micro-batch or largest model (llama family) that fits (exit 1 if none; with "
      "--levers, if no combination fits either)");
  cmd->add_option("what", args->what, "seq | micro-batch | params")->required()->type_name("WHAT");
  add_model_run_options(*cmd, args->model_run);
  cmd->add_option("--margin", args->margin, "memory kept free, a fraction of the GPU (default 0, as the fit check)")
      ->type_name("FRACTION")->check(fraction_below_one("--margin"));
  cmd->add_flag("--json", args->json, "print one JSON object");
  cmd->add_option("--levers", args->levers,
                  fmt::format("also the largest value with each combination of these levers: precision, optimizer, "
                              "optimizer-impl, recompute, batch, attention, adapters, gpus (2..8 with ZeRO 1-3), offload, "
                              "ep (MoE), allocator ({}: expandable segments)",
                              profiles_offering(&stack_profile::offers_expandable_segments)))
      ->type_name("LIST");
  cmd->add_option("--top", args->top, "with --levers, at most this many rows (default 8)")
      ->type_name("N")->check(whole_number("--top", 1));

  cmd->callback([args, &chosen]() {
    chosen = [args]() -> int {
      model_run_args a = args->model_run;
      const bool params = args->what == "params";
      if (args->what != "seq" && args->what != "micro-batch" && !params)
        throw input_error(fmt::format("max: unknown quantity '{}' (known: seq, micro-batch, params)", args->what));
      if (params && !a.family.empty() && a.family != "llama")
        throw input_error("max params: derived shapes exist for the llama family only (see plan models for gpt presets)");
      // The model is what max params searches: a flag that picks or shapes one would be ignored, so it is refused.
      if (params)
        for (const auto& [given, flag] : {std::pair{&a.model, "--model"}, {&a.params, "--params"}, {&a.hf_config, "--hf-config"},
                                          {&a.layers, "--layers"}, {&a.hidden, "--hidden"}, {&a.heads, "--heads"},
                                          {&a.kv_heads, "--kv-heads"}, {&a.ffn, "--ffn"}, {&a.vocab, "--vocab"},
                                          {&a.experts, "--experts"}, {&a.experts_per_token, "--experts-per-token"}})
          if (!given->empty())
            throw input_error(fmt::format("max params searches derived llama-family shapes (vocabulary 32,000, as --params "
                                          "derives them): {} does not apply",
                                          flag));
      if (params) a.params = "7B";  // a placeholder shape: the search replaces it
      if (args->what == "seq" && a.seq.empty()) a.seq = "1";
      const resolved_run r = resolve_model_run(a);
      max_question q;
      q.what = params ? max_quantity::params : args->what == "seq" ? max_quantity::seq : max_quantity::micro_batch;
      q.model = {r.model, describe_model(r.model)};
      q.run = r.run;
      q.gpu = {r.gpu, r.calib};
      q.margin = args->margin;
      q.keep_global_batch = q.what == max_quantity::micro_batch && !a.global_batch.empty();
      const bool keeps_global_batch = q.keep_global_batch;

      // Each probe replays the allocator; with --levers, for every combination: seconds to minutes.
      progress bar(fmt::format("plan max {}: searching{}", args->what, args->levers.empty() ? "" : " with the levers"));
      const max_answer answer = find_max(q);
      const std::optional<std::uint64_t>& best = answer.best;
      const std::vector<std::uint64_t>& misses_below = answer.misses_below;
      const sweep_model& model = answer.model;
      const run_config& run = answer.run;
      const std::uint64_t stride = answer.stride;
      const std::string unit = params ? "parameters" : args->what == "seq" ? "tokens" : "sequences";
      const std::uint64_t value = answer.value;

      // With --levers: the same question for every combination of the levers, as a ladder (planner/search/max_search.hpp).
      const unsigned levers = args->levers.empty() ? 0u : parse_levers(args->levers, "--levers");
      std::vector<ladder_row> ladder;
      if (!args->levers.empty()) ladder = max_lever_ladder(q, levers, args->top);
      bar.finish();
      if (args->json) {
        nlohmann::json j{{"what", args->what}, {"gpu", r.gpu.name}, {"fits", best.has_value()}};
        if (best) {
          j["value"] = value;
          j["peak_bytes"] = answer.at_max->peak_bytes;
          j["budget_bytes"] = answer.at_max->budget_bytes;
          if (params)
            j["model"] = {{"family", "llama"},           {"layers", model.spec.layers},     {"hidden", model.spec.hidden},
                          {"heads", model.spec.heads},   {"kv_heads", model.spec.kv_heads}, {"ffn", model.spec.ffn},
                          {"vocab", model.spec.vocab}};
          j["micro_batch"] = run.micro_batch;
          j["grad_accum"] = run.grad_accum;
          if (answer.one_more) j["next_peak_bytes"] = answer.one_more->peak_bytes;
          if (!params) {
            j["not_fitting_below"] = misses_below;
            j["not_fitting_below_stride"] = stride;  // with the global batch kept: every dividing micro-batch tried
          }
          if (keeps_global_batch) j["global_batch"] = run.global_batch();
        }
        if (!args->levers.empty()) {
          j["with_levers"] = nlohmann::json::array();
          for (const ladder_row& row : ladder)
            j["with_levers"].push_back({{"changes", row.changes}, {"value", row.value}, {"peak_bytes", row.peak_bytes},
                                        {"cost", suggestion_cost_text(row.costs)}});
        }
        fmt::print("{}\n", j.dump(2));
        return best || !ladder.empty() ? 0 : 1;
      }
      // The ladder first when the run as given reaches nothing: it is then the only answer.
      auto print_ladder = [&]() {
        if (args->levers.empty()) return;
        std::vector<std::string> flags(ladder.size());
        std::size_t width = 56;  // the changes column, as wide as its longest row
        for (std::size_t i = 0; i < ladder.size(); ++i) {
          for (const std::string& c : ladder[i].changes) flags[i] += (flags[i].empty() ? "" : " ") + c;
          if (flags[i].empty()) flags[i] = "(as given)";
          width = std::max(width, flags[i].size());
        }
        fmt::print("\nWith the levers {} (ranked as the fit check ranks its suggestions: cost, then fewest changes; each "
                   "row reaches further than every row above it):\n  {:>2}  {:<{}} {:>18} {:>10}  {}\n",
                   lever_names(levers), "#", "changes", width, unit, "peak", "cost");
        for (std::size_t i = 0; i < ladder.size(); ++i)
          fmt::print("  {:>2}  {:<{}} {:>18} {:>10}  {}\n", i + 1, flags[i], width, grouped(ladder[i].value),
                     gib(ladder[i].peak_bytes), suggestion_cost_text(ladder[i].costs));
        if (ladder.empty()) fmt::print("  nothing fits with any combination of them\n");
      };
      if (!best) {
        fmt::print("Nothing fits: even the smallest {} ({}) exceeds {} of {}.\n", args->what, params ? "1M parameters" : "1",
                   gib(answer.budget_bytes), r.gpu.description);
        print_ladder();
        return ladder.empty() ? 1 : 0;
      }
      const std::string subject = params ? fmt::format("llama-family model (derived shape: L={} h={} heads={} ffn={})",
                                                       model.spec.layers, model.spec.hidden, model.spec.heads, model.spec.ffn)
                                         : args->what == "seq" ? "sequence" : "micro-batch";
      fmt::print("Largest {} that fits on {}: {} {}, peak {} of {}.\n", subject, r.gpu.description, grouped(value), unit,
                 gib(answer.at_max->peak_bytes), gib(answer.at_max->budget_bytes));
      // A derived shape's count is not the target's: the next target, not "1M more", names it; with the global
      // batch kept, the next micro-batch that divides it.
      const std::string step_more = params               ? fmt::format("the shape derived for {}M parameters", *best + 1)
                                    : keeps_global_batch ? fmt::format("micro-batch {}, the next that divides the global batch",
                                                                       answer.next.value_or(0))
                                                         : "+1";
      const std::optional<max_peak>& next = answer.one_more;
      if (next && next->peak_bytes > next->budget_bytes)
        fmt::print("One step more ({}) needs {} bytes, {} over the budget.\n", step_more,
                   grouped(next->peak_bytes), grouped(next->peak_bytes - next->budget_bytes));
      else if (next)  // within the GPU's budget: the host memory for offload is what runs out
        fmt::print("One step more ({}) needs {} bytes of GPU memory, within the budget, but more host memory than "
                   "--host-memory gives.\n", step_more, grouped(next->peak_bytes));
      else if (keeps_global_batch)
        fmt::print("That is each data-parallel GPU's whole share of the global batch: no accumulation.\n");
      else if (*best == answer.limit) fmt::print("That is the search's upper limit ({}).\n", grouped(answer.limit));
      if (!misses_below.empty())
        fmt::print("Not every smaller {} fits: {} {} not ({}the caching allocator, replayed, splits its segments "
                   "differently at each size; plan shows where one runs out).\n",
                   args->what == "seq" ? "sequence" : "micro-batch", grid_ranges(misses_below, stride),
                   misses_below.size() == 1 ? "does" : "do",
                   stride > 1           ? fmt::format("of the multiples of {} tried below it; ", stride)
                   : keeps_global_batch ? std::string("of the micro-batches that divide the global batch; ")
                                        : std::string());
      fmt::print("Everything else as given: {}, {}, recompute {}, {} attention, seq {}, micro-batch {}{}.\n",
                 precision_name(run.precision), optimizer_name(run.optimizer), recompute_name(run.recompute),
                 attention_name(run.attention), run.seq, run.micro_batch,
                 run.grad_accum > 1 ? fmt::format(" x {} accumulation", run.grad_accum) : "");
      print_ladder();
      return 0;
    };
  });
}

}  // namespace trainplan::cli
