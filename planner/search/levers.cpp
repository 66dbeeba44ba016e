// The levers (levers.hpp): each one's alternatives for a run, where its stack and GPU allow them, their names
// and flags, and the costs derived from the difference between two run_configs.
#include "planner/search/levers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "planner/profiles/registry.hpp"
#include "planner/util/input_error.hpp"
#include "planner/search/max_fit.hpp"
#include "planner/util/sweep_axis.hpp"

namespace trainplan {
namespace {

constexpr std::string_view lever_names_in_order[lever_count] = {
    "precision", "optimizer", "recompute", "batch", "attention", "adapters", "gpus", "offload", "seq", "optimizer-impl", "ep", "allocator", "loss"};

// Precision changes reset the gradient dtype to the regime's own: an fp32 gradient buffer kept from
// the base run would undo most of what the change saves.
lever_change precision_to(precision_regime p) {
  return {lever_precision, [p](run_config& r) {
            r.precision = p;
            r.grad_dtype = grad_dtype_choice::automatic;
          }};
}

// The largest power of two dividing both the experts and the data-parallel GPUs; 1 for a dense model.
std::uint64_t widest_expert_parallelism(const model_spec& model, const run_config& run) {
  if (!model.is_moe()) return 1;
  std::uint64_t ep = 1;
  while (model.experts % (ep * 2) == 0 && run.data_parallel() % (ep * 2) == 0) ep *= 2;
  return ep;
}

}  // namespace

unsigned parse_levers(std::string_view list, std::string_view option) {
  unsigned levers = 0;
  for (const std::string& name : parse_name_axis(list, std::string(option).c_str())) {
    unsigned bit = 0;
    for (unsigned i = 0; i < lever_count; ++i)
      if (name == lever_names_in_order[i]) bit = 1u << i;
    if (bit == 0)
      throw input_error(fmt::format("{}: unknown lever '{}' (known: {})", option, name, lever_names(every_lever)));
    levers |= bit;
  }
  return levers;
}

std::string_view lever_name(lever_bit lever) {
  for (unsigned i = 0; i < lever_count; ++i)
    if (lever == (1u << i)) return lever_names_in_order[i];
  return "?";
}

std::string lever_names(unsigned levers) {
  std::string out;
  for (unsigned i = 0; i < lever_count; ++i)
    if (levers & (1u << i)) out += (out.empty() ? "" : ", ") + std::string(lever_names_in_order[i]);
  return out.empty() ? "none" : out;
}

std::string suggestion_cost_text(unsigned costs) {
  std::string out;
  auto add = [&](const char* s) { out += (out.empty() ? "" : ", ") + std::string(s); };
  if (costs == cost_none) add("same numerics");
  if (costs & cost_numerics) add("changes the numerics");
  if (costs & cost_shorter_seq) add("shorter sequences");
  if (costs & cost_hardware) add("more hardware");
  if (costs & cost_slower) add("slower");
  if (costs & cost_library) add("another library");
  return out;
}

int cost_rank(unsigned costs) {
  if (costs & cost_hardware) return 3;
  if (costs & (cost_numerics | cost_shorter_seq)) return 2;
  if (costs & (cost_slower | cost_library)) return 1;
  return 0;
}

unsigned levers_changed(const run_config& from, const run_config& to) {
  unsigned levers = 0;
  if (from.precision != to.precision || from.grad_dtype != to.grad_dtype) levers |= lever_precision;
  if (from.optimizer != to.optimizer) levers |= lever_optimizer;
  if (from.optimizer_impl != to.optimizer_impl) levers |= lever_optimizer_impl;
  if (from.recompute != to.recompute) levers |= lever_recompute;
  if (from.micro_batch != to.micro_batch) levers |= lever_batch;
  if (from.attention != to.attention) levers |= lever_attention;
  if (from.finetune != to.finetune) levers |= lever_adapters;
  if (from.gpus != to.gpus || from.zero != to.zero) levers |= lever_gpus;
  if (from.offload != to.offload) levers |= lever_offload;
  if (from.seq != to.seq) levers |= lever_seq;
  if (from.ep != to.ep) levers |= lever_ep;
  if (from.expandable_segments != to.expandable_segments) levers |= lever_allocator;
  if (from.loss != to.loss) levers |= lever_loss;  // (no lever changes --loss-chunks; change_flags names --loss alone)
  return levers;
}

unsigned change_costs(const run_config& from, const run_config& to) {
  const unsigned levers = levers_changed(from, to);
  unsigned costs = cost_none;
  if (levers & (lever_precision | lever_optimizer | lever_adapters)) costs |= cost_numerics;
  if ((levers & lever_gpus) && to.gpus > from.gpus) costs |= cost_hardware;
  if ((levers & lever_offload) && to.offload != offload_mode::none) costs |= cost_slower;
  if ((levers & lever_seq) && to.seq < from.seq) costs |= cost_shorter_seq;
  if ((levers & lever_loss) && to.loss != loss_kind::standard &&
      std::ranges::find(profile_of(to).own_losses, to.loss) == profile_of(to).own_losses.end())
    costs |= cost_library;
  return costs;
}

std::vector<std::string> change_flags(const run_config& from, const run_config& to) {
  std::vector<std::string> flags;
  if (from.recompute != to.recompute) flags.push_back(fmt::format("--recompute {}", recompute_name(to.recompute)));
  if (from.attention != to.attention) flags.push_back(fmt::format("--attention {}", attention_name(to.attention)));
  if (from.micro_batch != to.micro_batch || from.grad_accum != to.grad_accum)
    flags.push_back(fmt::format("--micro-batch {} --grad-accum {}", to.micro_batch, to.grad_accum));
  // The precision is named when it changes, and also when the fine-tuning does while the precision stays:
  // the default depends on it (PyTorch + HF: bf16 under --finetune lora, amp-bf16 otherwise), so a run that relied on
  // the default would otherwise be run with another precision than the one evaluated.
  const bool default_moves = from.finetune != to.finetune &&
                             profile_of(to).default_precision(to.finetune == finetune_kind::lora) != to.precision;
  if (from.precision != to.precision || default_moves)
    flags.push_back(fmt::format("--precision {}", precision_name(to.precision)));
  if (from.grad_dtype != to.grad_dtype)
    flags.push_back(fmt::format("--grad-dtype {}", grad_dtype_choice_name(to.grad_dtype)));
  if (from.optimizer != to.optimizer) flags.push_back(fmt::format("--optimizer {}", optimizer_name(to.optimizer)));
  if (from.optimizer_impl != to.optimizer_impl)
    flags.push_back(fmt::format("--optimizer-impl {}", optimizer_impl_name(to.optimizer_impl)));
  if (from.offload != to.offload) flags.push_back(fmt::format("--offload {}", offload_name(to.offload)));
  if (from.finetune != to.finetune) flags.push_back(fmt::format("--finetune {}", finetune_name(to.finetune)));
  // More GPUs name their count and stage; a higher stage on the GPUs the run has names the stage alone (appended
  // to a command line that gives --gpus already, a second --gpus would be refused).
  if (from.gpus != to.gpus) flags.push_back(fmt::format("--gpus {} --zero {}", to.gpus, to.zero));
  else if (from.zero != to.zero) flags.push_back(fmt::format("--zero {}", to.zero));
  if (from.ep != to.ep) flags.push_back(fmt::format("--ep {}", to.ep));
  if (from.seq != to.seq) flags.push_back(fmt::format("--seq {}", to.seq));
  if (to.expandable_segments && !from.expandable_segments)  // the allocator lever only turns them on
    flags.push_back("--expandable-segments");
  if (from.loss != to.loss) flags.push_back(fmt::format("--loss {}", loss_name(to.loss)));
  return flags;
}

bool framework_can_train(const model_spec& model, const run_config& run) {
  try {
    const precision_layout layout = make_precision_layout(run.precision, run.grad_dtype);
    profile_of(run).check(model, run, layout);
    return true;
  } catch (const input_error&) {
    return false;
  }
}

std::vector<lever_change> lever_alternatives(lever_bit lever, const model_spec& model, const run_config& base,
                                             const gpu_spec& gpu, const lever_reach& reach) {
  std::vector<lever_change> out;
  const bool has_bf16 = gpu.peak_flops_per_s(dtype::bf16) > 0, has_fp8 = gpu.peak_flops_per_s(dtype::fp8) > 0;
  switch (lever) {
    case lever_recompute:
      if (base.recompute == recompute_mode::none)
        out.push_back({lever, [](run_config& r) { r.recompute = recompute_mode::selective; }});
      if (base.recompute != recompute_mode::full)
        out.push_back({lever, [](run_config& r) { r.recompute = recompute_mode::full; }});
      break;
    case lever_attention:
      if (base.attention == attention_kind::eager)
        out.push_back({lever, [](run_config& r) { r.attention = attention_kind::flash; }});
      break;
    case lever_batch:  // the largest smaller divisors of the micro-batch, accumulation scaled to keep the global batch
      for (std::uint64_t mb : largest_proper_divisors(base.micro_batch, 6)) {  // beyond six the list only repeats the lesson
        const std::uint64_t factor = base.micro_batch / mb;
        if (base.grad_accum > UINT64_MAX / factor) continue;  // an accumulation no counter holds
        const std::uint64_t accum = base.grad_accum * factor;
        out.push_back({lever, [mb, accum](run_config& r) {
                         r.micro_batch = mb;
                         r.grad_accum = accum;
                       }});
      }
      break;
    case lever_precision: {
      const precision_regime p = base.precision;
      if (base.grad_dtype == grad_dtype_choice::fp32)
        out.push_back({lever, [](run_config& r) { r.grad_dtype = grad_dtype_choice::automatic; }});
      if ((p == precision_regime::fp32 || p == precision_regime::amp_bf16 || p == precision_regime::megatron_bf16) && has_bf16)
        out.push_back(precision_to(precision_regime::bf16_mixed));
      if (p == precision_regime::fp32 && !has_bf16) out.push_back(precision_to(precision_regime::fp16_mixed));
      // Pure bf16 (model.to(bfloat16), bf16 optimizer state): what most people try first when 7B does not fit.
      if (p != precision_regime::bf16 && has_bf16) out.push_back(precision_to(precision_regime::bf16));
      // fp8 where the stack trains in it (its own checks refuse it otherwise: Hugging Face's Trainer has no fp8
      // path of its own, it goes through Transformer Engine or torchao).
      if (p != precision_regime::fp8_mixed && has_fp8)
        out.push_back(precision_to(precision_regime::fp8_mixed));
      break;
    }
    case lever_optimizer:
      if (base.optimizer == optimizer_kind::sgd) break;  // nothing lighter than stateless SGD
      for (optimizer_kind o : {optimizer_kind::adamw_8bit, optimizer_kind::adafactor, optimizer_kind::lion})
        if (base.optimizer != o) out.push_back({lever, [o](run_config& r) { r.optimizer = o; }});
      break;
    case lever_optimizer_impl:  // PyTorch's AdamW flavours, where the stack offers them
      if (profile_of(base).offers_optimizer_impl && base.optimizer_impl == optimizer_impl_kind::foreach_impl)
        out.push_back({lever, [](run_config& r) {  // only AdamW has the two flavours
                         if (r.optimizer == optimizer_kind::adamw) r.optimizer_impl = optimizer_impl_kind::fused;
                       }});
      break;
    case lever_adapters:
      if (base.finetune == finetune_kind::full) {
        // A LoRA base is loaded as the stack's default for LoRA (peft's setup: bf16) rather than kept in fp32
        // under autocast (whose casts of frozen weights are not cached: a bf16 copy of every weight would be
        // saved per layer).
        out.push_back({lever, [](run_config& r) {
                         r.finetune = finetune_kind::lora;
                         const stack_profile& stack = profile_of(r);
                         if (r.precision == stack.default_precision(false)) r.precision = stack.default_precision(true);
                       }});
        out.push_back({lever, [](run_config& r) { r.finetune = finetune_kind::qlora; }});
      }
      break;
    case lever_offload:
      if (base.offload == offload_mode::none)
        out.push_back({lever, [](run_config& r) { r.offload = offload_mode::optimizer; }});
      break;
    case lever_gpus:  // more data-parallel replicas of the same model-parallel group, each ZeRO stage
      // Already data-parallel: a higher ZeRO stage shards the model state over the GPUs there are.
      if (base.data_parallel() > 1)
        for (int stage = base.zero + 1; stage <= 3; ++stage) out.push_back({lever, [stage](run_config& r) { r.zero = stage; }});
      for (std::uint64_t n = base.gpus * 2; n <= reach.max_gpus; n *= 2)
        for (int stage : {1, 2, 3}) {
          out.push_back({lever, [n, stage](run_config& r) {
                           r.gpus = n;
                           r.zero = stage;
                         }});
          run_config wider = base;
          wider.gpus = n;
          if (const std::uint64_t ep = widest_expert_parallelism(model, wider); ep > base.ep)
            out.push_back({lever, [n, stage, ep](run_config& r) {
                             r.gpus = n;
                             r.zero = stage;
                             r.ep = ep;
                           }});
        }
      break;
    case lever_ep:  // every larger expert parallelism the experts and the data-parallel GPUs allow
      for (std::uint64_t ep = base.ep * 2; ep <= widest_expert_parallelism(model, base); ep *= 2)
        if (model.experts % ep == 0 && base.data_parallel() % ep == 0)
          out.push_back({lever, [ep](run_config& r) { r.ep = ep; }});
      break;
    case lever_allocator:  // the caching allocator's expandable segments, where the stack's allocator is PyTorch's
      if (profile_of(base).offers_expandable_segments && base.pp == 1 && !base.expandable_segments)
        out.push_back({lever, [](run_config& r) { r.expandable_segments = true; }});
      break;
    case lever_loss:  // the loss in pieces, where the stack takes --loss (its check refuses it elsewhere)
      if (base.loss == loss_kind::standard)
        for (loss_kind l : {loss_kind::chunked, loss_kind::fused_linear})
          out.push_back({lever, [l](run_config& r) { r.loss = l; }});
      break;
    case lever_seq: break;  // found by a search against the rest of the run
  }
  std::erase_if(out, [&](const lever_change& c) {
    run_config r = base;
    c.apply(r);
    return !framework_can_train(model, r);
  });
  return out;
}

std::vector<run_config> lever_space(unsigned levers, const model_spec& model, const run_config& base,
                                    const gpu_spec& gpu, const lever_reach& reach) {
  std::vector<run_config> space{base};
  std::set<std::vector<std::string>> seen{{}};  // by the flags that lead there from base
  for (unsigned i = 0; i < lever_count; ++i) {
    const auto lever = static_cast<lever_bit>(1u << i);
    if (!(levers & lever)) continue;
    const std::vector<lever_change> alternatives = lever_alternatives(lever, model, base, gpu, reach);
    const std::size_t before = space.size();
    for (std::size_t k = 0; k < before; ++k)
      for (const lever_change& c : alternatives) {
        run_config changed = space[k];
        c.apply(changed);
        if (seen.insert(change_flags(base, changed)).second) space.push_back(changed);
      }
  }
  return space;
}

}  // namespace trainplan
