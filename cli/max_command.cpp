// `plan max seq|micro-batch|params`: the largest value that still fits the GPU with everything else fixed.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "planner/model/model_facts.hpp"
#include "cli/commands.hpp"
#include "cli/format.hpp"
#include "cli/model_run_options.hpp"
#include "planner/util/input_error.hpp"
#include "planner/search/levers.hpp"
#include "planner/search/max_fit.hpp"
#include "planner/model/param_count.hpp"
#include "planner/search/search.hpp"
#include "planner/io/shape_from_params.hpp"

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

// Sets the quantity `max` searches: the sequence, the micro-batch, or the model (a derived llama shape of
// v million parameters). `per_gpu_batch` (max micro-batch with --global-batch: the sequences each
// data-parallel GPU takes a step) keeps the global batch: the accumulation makes up the rest.
void set_quantity(const std::string& what, std::uint64_t v, sweep_model& model, run_config& run,
                  std::uint64_t per_gpu_batch = 0) {
  if (what == "params") {
    model.spec = derive_llama_shape(v * 1'000'000ull);
    model.facts = describe_model(model.spec);
  } else if (what == "seq") {
    run.seq = v;
  } else {
    run.micro_batch = v;
    if (per_gpu_batch) run.grad_accum = per_gpu_batch / v;
  }
}

// Sequences are probed around the boundary on multiples of this: the lengths people train at.
constexpr std::uint64_t seq_grid = 64;

// One value of the quantity, as a probe around the boundary sees it: fits, fails, or beyond (its tensors alone
// exceed the budget, or it cannot exist).
fit_probe probe_value(const std::string& what, std::uint64_t v, sweep_model& model, run_config& run, const sweep_gpu& gpu,
                      double margin, std::uint64_t per_gpu_batch) {
  set_quantity(what, v, model, run, per_gpu_batch);
  const std::optional<config_summary> s = summarize_config(model, gpu, run, margin);
  if (!s || s->floor_bytes > s->budget_bytes) return fit_probe::beyond;
  return s->fits ? fit_probe::fits : fit_probe::fails;
}

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

// One combination of levers and the largest value it reaches.
struct lever_reach_row {
  run_config run;
  std::vector<std::string> changes;
  unsigned costs = cost_none;
  std::uint64_t value = 0;  // in the question's unit (parameters for params)
  std::uint64_t peak_bytes = 0;
};

// The ladder's order, as the fit check ranks its suggestions: cost, then fewest changes. Within a group the
// row reaching furthest is the group's; a group joins the ladder only when it reaches further than every row
// above it: a ladder of what each further step buys.
bool ladder_order(const lever_reach_row& a, const lever_reach_row& b) {
  if (cost_rank(a.costs) != cost_rank(b.costs)) return cost_rank(a.costs) < cost_rank(b.costs);
  return a.changes.size() < b.changes.size();
}

// The ladder from every combination with its bound as its value (at least what it reaches): `reach` gives a
// row's exact value and peak (nullopt: it reaches nothing), and is asked only of the rows whose bound passes
// the ladder's top and the best of their group so far, the group's largest bounds first. On a tie the row
// first in the combinations' order is the group's, as when every row was reached.
std::vector<lever_reach_row> build_ladder(std::vector<lever_reach_row> bounded,
                                          const std::function<std::optional<lever_reach_row>(const lever_reach_row&)>& reach) {
  std::stable_sort(bounded.begin(), bounded.end(), ladder_order);
  std::vector<lever_reach_row> ladder;
  for (std::size_t i = 0; i < bounded.size();) {  // a group: the same cost and number of changes
    std::size_t end = i;
    while (end < bounded.size() && !ladder_order(bounded[i], bounded[end]) && !ladder_order(bounded[end], bounded[i])) ++end;
    std::vector<std::size_t> order(end - i);
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = i + k;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return bounded[a].value > bounded[b].value; });
    const std::uint64_t top = ladder.empty() ? 0 : ladder.back().value;
    std::optional<lever_reach_row> best;
    std::size_t best_index = 0;
    for (const std::size_t k : order) {
      const std::uint64_t bound = bounded[k].value;
      if (bound <= top) break;  // nor can any row after it: it cannot join the ladder
      if (best && (bound < best->value || (bound == best->value && k > best_index))) continue;
      std::optional<lever_reach_row> row = reach(bounded[k]);
      if (!row || row->value <= top) continue;
      if (!best || row->value > best->value || (row->value == best->value && k < best_index)) best = std::move(row), best_index = k;
    }
    if (best) ladder.push_back(std::move(*best));
    i = end;
  }
  return ladder;
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
      ->type_name("FRACTION");
  cmd->add_flag("--json", args->json, "print one JSON object");
  cmd->add_option("--levers", args->levers,
                  "also the largest value with each combination of these levers: precision, optimizer, optimizer-impl, "
                  "recompute, batch, attention, adapters, gpus (2..8 with ZeRO 1-3), offload, ep (MoE), allocator (hf: expandable "
                  "segments)")
      ->type_name("LIST");
  cmd->add_option("--top", args->top, "with --levers, at most this many rows (default 8)")->type_name("N");

  cmd->callback([args, &chosen]() {
    chosen = [args]() -> int {
      if (!(args->margin >= 0 && args->margin < 1)) throw input_error("--margin must be at least 0 and below 1");
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
      resolved_run r = resolve_model_run(a);
      const sweep_gpu gpu{r.gpu, r.calib};
      sweep_model model{r.model, describe_model(r.model)};
      run_config run = r.run;

      // max micro-batch with --global-batch: each data-parallel GPU's share of the global batch stays, so only
      // the micro-batches that divide it are candidates, the accumulation making up the rest.
      const bool keeps_global_batch = args->what == "micro-batch" && !a.global_batch.empty();
      std::uint64_t hi = 1ull << 24;
      if (args->what == "seq" && r.model.max_positions) hi = r.model.max_positions;
      if (params) hi = 10'000'000;  // 10T parameters, in millions
      const std::uint64_t stride = args->what == "seq" ? seq_grid : 1;

      // The largest value that fits for one model and run (the answer, or one ladder row). Under hf the verdict
      // is the allocator replay's, which need not follow the quantity monotonically (planner/search/max_fit.hpp):
      // after the bisection, the climb over every micro-batch, or for sequences every multiple of 64, above its
      // boundary, and with `name_misses` the smaller ones on that grid that do not fit. A model's size is
      // searched as derived shapes, which change by whole layers and widths: bisection alone. With the global
      // batch kept, every dividing micro-batch is tried from the top.
      struct reach {
        std::optional<std::uint64_t> best, next;
        std::vector<std::uint64_t> misses_below;
      };
      // The bisection's boundary: the largest value whose summary passes `passes`. A configuration that cannot
      // exist at the smallest value is an error in the options (exit 2), not "nothing fits".
      auto bisect = [&](sweep_model& m, run_config& c, std::uint64_t per_gpu_batch, replay_when replay, auto passes) {
        return largest_fitting(1, hi, [&](std::uint64_t v) {
          set_quantity(args->what, v, m, c, per_gpu_batch);
          std::string why;
          const std::optional<config_summary> s = summarize_config(m, gpu, c, args->margin, &why, replay);
          if (!s && v == 1) throw input_error(why);
          return s && passes(*s);
        });
      };
      auto reach_of = [&](sweep_model& m, run_config& c, bool name_misses) {
        const std::uint64_t per_gpu_batch = keeps_global_batch ? c.micro_batch * c.grad_accum : 0;
        auto probe = [&](std::uint64_t v) { return probe_value(args->what, v, m, c, gpu, args->margin, per_gpu_batch); };
        reach out;
        if (keeps_global_batch) {
          const candidate_fit f = largest_fitting_candidate(divisors_up_to(per_gpu_batch, hi), probe, name_misses);
          out.best = f.best, out.next = f.next, out.misses_below = f.misses_below;
          if (!out.best) {  // as below: a configuration that cannot exist even at micro-batch 1 is an error (exit 2)
            set_quantity(args->what, 1, m, c, per_gpu_batch);
            std::string why;
            if (!summarize_config(m, gpu, c, args->margin, &why)) throw input_error(why);
          }
        } else {
          out.best = bisect(m, c, 0, replay_when::tensors_fit, [](const config_summary& s) { return s.fits; });
          if (out.best && !params) {
            if (name_misses) {
              const refined_fit around = refine_largest_fitting(*out.best, hi, stride, probe);
              out.best = around.best, out.misses_below = around.misses_below;
            } else {
              out.best = climb_largest_fitting(*out.best, hi, stride, probe);
            }
          }
          if (out.best && *out.best < hi) out.next = *out.best + 1;
        }
        if (out.best) set_quantity(args->what, *out.best, m, c, per_gpu_batch);  // leaves m and c at the maximum
        return out;
      };
      auto summary_at = [&](sweep_model& m, run_config& c) {
        std::string why;
        std::optional<config_summary> s = summarize_config(m, gpu, c, args->margin, &why);
        if (!s) throw input_error(why);
        return *s;
      };

      const reach answer = reach_of(model, run, true);
      const std::optional<std::uint64_t> best = answer.best;
      const std::vector<std::uint64_t>& misses_below = answer.misses_below;
      std::optional<config_summary> at_max, next;
      if (best) {
        // one step more, its peak as plan gives it: the replay's least memory, not the estimate
        if (answer.next) {
          sweep_model m = model;
          run_config c = run;
          set_quantity(args->what, *answer.next, m, c, keeps_global_batch ? run.micro_batch * run.grad_accum : 0);
          std::string why;
          next = summarize_config(m, gpu, c, args->margin, &why, replay_when::always);
        }
        at_max = summary_at(model, run);
      }

      const std::string unit = params ? "parameters" : args->what == "seq" ? "tokens" : "sequences";
      const std::uint64_t value = !best ? 0 : params ? count_params(model.spec).total : *best;

      // With --levers: the same question for every combination of the levers (lever_space), as a ladder. Each row
      // is reached as the answer is, without naming what fails below it, so that its value is what `plan max`
      // gives with the row's flags.
      std::vector<lever_reach_row> ladder;
      const unsigned levers = args->levers.empty() ? 0u : parse_levers(args->levers, "--levers");
      if (!args->levers.empty()) {
        if ((levers & lever_batch) && args->what == "micro-batch")
          throw input_error("--levers: batch is the question itself in max micro-batch");
        if (levers & lever_seq) throw input_error("--levers: seq is not a lever of max (ask max seq instead)");
        // Reaching every combination as plan max does (bisection, then the climb with a replay at every step)
        // took minutes for nine levers. A combination's value is at most the largest whose tensors alone fit
        // the budget (no replay: tensor bytes grow with the quantity, and a fit needs them to), so the ladder
        // is built in its own order and only a combination whose bound passes the rows above it is reached.
        std::vector<lever_reach_row> bounded;  // every combination that can run, value = its bound
        for (const run_config& candidate : lever_space(levers, r.model, r.run, r.gpu, lever_reach{8})) {
          sweep_model m = model;
          run_config c = candidate;
          const std::uint64_t per_gpu_batch = keeps_global_batch ? c.micro_batch * c.grad_accum : 0;
          std::optional<std::uint64_t> bound;
          try {
            bound = bisect(m, c, per_gpu_batch, replay_when::never,
                           [](const config_summary& s) { return s.floor_bytes <= s.budget_bytes; });
          } catch (const input_error&) {
            continue;  // a combination that cannot run at all reaches nothing
          }
          if (!bound) continue;
          set_quantity(args->what, *bound, m, c, per_gpu_batch);
          const std::uint64_t bound_value = params ? count_params(m.spec).total : *bound;  // in the ladder's unit
          bounded.push_back({candidate, change_flags(r.run, candidate), change_costs(r.run, candidate), bound_value, 0});
        }
        ladder = build_ladder(std::move(bounded), [&](const lever_reach_row& row) -> std::optional<lever_reach_row> {
          sweep_model m = model;
          run_config c = row.run;
          std::optional<std::uint64_t> v;
          try {
            v = reach_of(m, c, false).best;
          } catch (const input_error&) {
            return std::nullopt;
          }
          if (!v) return std::nullopt;
          lever_reach_row reached = row;
          reached.run = c;
          reached.value = params ? count_params(m.spec).total : *v;
          reached.peak_bytes = summary_at(m, c).peak_bytes;
          return reached;
        });
        if (ladder.size() > args->top) ladder.resize(args->top);
      }
      if (args->json) {
        nlohmann::json j{{"what", args->what}, {"gpu", r.gpu.name}, {"fits", best.has_value()}};
        if (best) {
          j["value"] = value;
          j["peak_bytes"] = at_max->peak_bytes;
          j["budget_bytes"] = at_max->budget_bytes;
          if (params)
            j["model"] = {{"family", "llama"},           {"layers", model.spec.layers},     {"hidden", model.spec.hidden},
                          {"heads", model.spec.heads},   {"kv_heads", model.spec.kv_heads}, {"ffn", model.spec.ffn},
                          {"vocab", model.spec.vocab}};
          j["micro_batch"] = run.micro_batch;
          j["grad_accum"] = run.grad_accum;
          if (next) j["next_peak_bytes"] = next->peak_bytes;
          if (!params) {
            j["not_fitting_below"] = misses_below;
            j["not_fitting_below_stride"] = stride;  // with the global batch kept: every dividing micro-batch tried
          }
          if (keeps_global_batch) j["global_batch"] = run.micro_batch * run.grad_accum * run.data_parallel();
        }
        if (!args->levers.empty()) {
          j["with_levers"] = nlohmann::json::array();
          for (const lever_reach_row& row : ladder)
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
                   gib(memory_budget(r.gpu, args->margin)), r.gpu.description);
        print_ladder();
        return ladder.empty() ? 1 : 0;
      }
      const std::string subject = params ? fmt::format("llama-family model (derived shape: L={} h={} heads={} ffn={})",
                                                       model.spec.layers, model.spec.hidden, model.spec.heads, model.spec.ffn)
                                         : args->what == "seq" ? "sequence" : "micro-batch";
      fmt::print("Largest {} that fits on {}: {} {}, peak {} of {}.\n", subject, r.gpu.description, grouped(value), unit,
                 gib(at_max->peak_bytes), gib(at_max->budget_bytes));
      // A derived shape's count is not the target's: the next target, not "1M more", names it; with the global
      // batch kept, the next micro-batch that divides it.
      const std::string step_more = params               ? fmt::format("the shape derived for {}M parameters", *best + 1)
                                    : keeps_global_batch ? fmt::format("micro-batch {}, the next that divides the global batch",
                                                                       answer.next.value_or(0))
                                                         : "+1";
      if (next && next->peak_bytes > next->budget_bytes)
        fmt::print("One step more ({}) needs {} bytes, {} over the budget.\n", step_more,
                   grouped(next->peak_bytes), grouped(next->peak_bytes - next->budget_bytes));
      else if (next)  // within the GPU's budget: the host memory for offload is what runs out
        fmt::print("One step more ({}) needs {} bytes of GPU memory, within the budget, but more host memory than "
                   "--host-memory gives.\n", step_more, grouped(next->peak_bytes));
      else if (keeps_global_batch)
        fmt::print("That is each data-parallel GPU's whole share of the global batch: no accumulation.\n");
      else if (*best == hi) fmt::print("That is the search's upper limit ({}).\n", grouped(hi));
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
