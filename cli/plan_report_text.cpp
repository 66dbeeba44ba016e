// The fit check's report for people (plan_report.hpp, render_plan_text): the model and run, the memory at the
// peak, the verdict, the step's compute and time, what would make it fit, and the assumptions.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>

#include "cli/format.hpp"
#include "cli/model_features.hpp"
#include "cli/plan_report.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/run/moe.hpp"
#include "planner/search/levers.hpp"

namespace trainplan::cli {
namespace {

// The stack's title as this run uses it: "PyTorch eager" is not what runs under --compile.
std::string stack_title(const run_config& run) {
  std::string title(profile_of(run).title);
  constexpr std::string_view eager = "PyTorch eager";
  if (const std::size_t at = title.find(eager); compiles_layers(run) && at != std::string::npos)
    title.replace(at, eager.size(), "PyTorch under torch.compile");
  return title;
}

std::string precision_summary(const precision_layout& l) {
  std::string s = fmt::format("{} weights, {} grads", dtype_name(l.weights), dtype_name(l.grads));
  if (l.master) s += fmt::format(", {} master", dtype_name(*l.master));
  if (l.grad_accum) s += fmt::format(", {} grad accumulation", dtype_name(*l.grad_accum));
  s += fmt::format(", {} activations", dtype_name(l.activations));
  if (l.gemm_input_saved) s += fmt::format(" ({} GEMM inputs)", dtype_name(*l.gemm_input_saved));
  if (l.regime == precision_regime::amp_fp16) s += "; torch.amp.GradScaler (four scalars, unscaling in place)";
  return s;
}

std::string shape_text(const tensor_shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  return s + "]";
}


// Where a wrapped line's continuations start: under the text of a labelled line ("  model  ", "  run    ",
// "  note   "), else two columns in from the line's own indent.
std::size_t continuation_indent(std::string_view text) {
  const std::size_t lead = std::min(text.find_first_not_of(' '), text.size());
  if (lead == 2 && text.size() > 9 && text[8] == ' ' && text[9] != ' ' && text.substr(2, 6).find(' ') != std::string_view::npos)
    return 9;
  return std::min<std::size_t>(lead + 2, 40);
}

// Appends `text` as lines of at most `width` columns, broken at spaces (a word longer than a line is cut), the
// continuations indented by `indent` and ended by `suffix` (" \\" for a shell command).
void append_wrapped(std::string& out, std::string_view text, std::size_t indent, std::size_t width = report_width,
                    std::string_view suffix = "") {
  std::string_view rest = text;
  bool first = true;
  while (true) {
    const std::size_t lead = first ? 0 : indent;
    const std::size_t room = width - lead;
    if (rest.size() <= room) {
      out.append(lead, ' ');
      out += rest;
      out += '\n';
      return;
    }
    const std::size_t cut_room = room - suffix.size();
    std::size_t cut = rest.rfind(' ', cut_room);
    const std::size_t text_start = first ? std::min(rest.find_first_not_of(' '), rest.size()) : 0;
    if (cut == std::string_view::npos || cut <= text_start) cut = cut_room;  // no space to break at
    std::string_view head = rest.substr(0, cut);
    while (!head.empty() && head.back() == ' ') head.remove_suffix(1);
    out.append(lead, ' ');
    out += head;
    out += suffix;
    out += '\n';
    rest = rest.substr(cut);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (rest.empty()) return;
    first = false;
  }
}

// The options a suggestion's flags are, split into name and value: "--gpus 8 --zero 3" -> --gpus 8, --zero 3.
std::vector<given_option> change_options(const std::vector<std::string>& changes) {
  std::vector<std::string> words;
  for (const std::string& c : changes) {
    std::size_t at = 0;
    while (at < c.size()) {
      const std::size_t end = std::min(c.find(' ', at), c.size());
      if (end > at) words.push_back(c.substr(at, end - at));
      at = end + 1;
    }
  }
  std::vector<given_option> out;
  for (std::size_t i = 0; i < words.size(); ++i) {
    given_option o{words[i], std::nullopt};
    if (i + 1 < words.size() && words[i + 1].rfind("--", 0) != 0) o.value = words[++i];
    out.push_back(o);
  }
  return out;
}

// What else a changed option settles: an option that says the same thing another way would contradict it.
std::vector<std::string_view> implied_by(std::string_view name) {
  if (name == "--grad-accum") return {"--global-batch"};  // --global-batch sets the accumulation
  if (name == "--zero") return {"--fsdp"};                // --fsdp is a ZeRO stage by FSDP's name
  if (name == "--gpus") return {"--nodes"};               // --nodes x GPUs per node must equal --gpus
  return {};
}

}  // namespace

std::vector<std::string> suggested_command(const std::vector<given_option>& given, const std::vector<std::string>& changes) {
  std::vector<given_option> merged = given;
  std::vector<given_option> added;
  for (const given_option& c : change_options(changes)) {
    for (std::string_view other : implied_by(c.name))
      std::erase_if(merged, [&](const given_option& g) { return g.name == other; });
    auto at = std::find_if(merged.begin(), merged.end(), [&](const given_option& g) { return g.name == c.name; });
    if (at != merged.end()) at->value = c.value;
    else added.push_back(c);
  }
  merged.insert(merged.end(), added.begin(), added.end());
  std::vector<std::string> words{"plan"};
  for (const given_option& g : merged) {
    words.push_back(g.name);
    if (g.value) words.push_back(*g.value);
  }
  return words;
}

std::string shell_line(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out += ' ';
    const bool plain = !w.empty() && std::all_of(w.begin(), w.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("-_./:=,+@%").find(c) != std::string_view::npos;
    });
    if (plain) {
      out += w;
      continue;
    }
    out += '\'';
    for (const char c : w) {
      if (c == '\'') out += "'\\''";
      else out += c;
    }
    out += '\'';
  }
  return out;
}

// One line when the GPU's time constants for the run's stack are another GPU's (catalog::calibration_for), empty when
// they are its own measurement or the default entry's.
static std::string derived_time_note(const plan_result& p) {
  const calibration_origin origin = p.calib.timing_origin(calibration_name(profile_of(p.run)));
  if (origin == calibration_origin::measured) return {};
  // GEMM efficiencies scaled by the achievable matmul rates (catalog::calibration_for).
  const std::string gemms =
      p.calib.matmul_scale == 1 ? std::string()
                                : fmt::format("; GEMMs x {:.3f}, the {}'s achievable share of its datasheet peak over the "
                                              "reference GPU's",
                                              p.calib.matmul_scale, p.gpu.name);
  if (origin == calibration_origin::derived)
    return fmt::format("time constants: the {}'s by the datasheets' peak ratios, not measured on the {}{}",
                       p.calib.derived_from, p.gpu.name, gemms);
  return gemms.empty() ? std::string() : "time constants: the default entry's" + gemms;
}

std::vector<std::string> plan_assumptions_summary(const plan_result& p) {
  std::vector<std::string> a;
  const stack_profile& stack = profile_of(p.run);
  if (p.run.gpus == 1)
    a.push_back("one GPU, no parallelism");
  else
    a.push_back(fmt::format("{} GPUs, memory per GPU; communication {}", p.run.gpus,
                            p.time.communication_modelled
                                ? fmt::format("timed on {}", p.gpu.cluster ? p.gpu.cluster->name : std::string("the cluster"))
                                : std::string("not modelled")));
  a.push_back(fmt::format("{} ({}), {}", stack.name, stack_title(p.run), precision_name(p.run.precision)));
  a.push_back(p.allocator ? std::string("memory: PyTorch's caching allocator replayed over 3 steps")
                          : fmt::format("memory: the tensors plus {} allocator slack", percent(stack.slack_fraction(p.calib))));
  a.push_back(fmt::format("time: each op's FLOPs or bytes at calibrated rates ({} profile)", stack.name));
  if (const std::string derived = derived_time_note(p); !derived.empty()) a.push_back(derived);
  return a;
}

std::vector<std::string> plan_assumptions(const plan_result& p) {
  std::vector<std::string> a;
  if (p.run.gpus == 1)
    a.push_back("one GPU, no data, tensor or pipeline parallelism");
  else if (p.time.communication_modelled)
    a.push_back(fmt::format("several GPUs: memory per GPU; communication on {} ({}): each collective's time from its "
                            "size, its group's placement and the links it crosses, overlapped with the compute the "
                            "stack runs it beside (docs/communication.md)",
                            p.gpu.cluster ? p.gpu.cluster->name : std::string("the cluster"),
                            p.gpu.cluster && p.gpu.cluster->name == p.gpu.node ? "the GPU's usual node; --cluster to change"
                                                                               : "--cluster"));
  else
    a.push_back(fmt::format("several GPUs: memory per GPU; communication time between GPUs is not modelled: {}",
                            p.comm_not_modelled.empty() ? std::string("no collectives") : p.comm_not_modelled));
  a.push_back(fmt::format("precision {}: {}", precision_name(p.run.precision), precision_summary(p.layout)));
  const stack_profile& stack = profile_of(p.run);
  a.push_back(std::string(stack.assumption));
  if (stack.describe) stack.describe(p.model, p.run, p.layout, a);
  a.push_back(stack.grads_per_parameter
                  ? "each gradient exists from its own backward until the optimizer step ends (zero_grad(set_to_none=True)); "
                    "optimizer state is created by the first optimizer step"
                  : "gradients exist from the first backward of a step until its optimizer step ends "
                    "(zero_grad(set_to_none=True)); optimizer state is created by the first optimizer step");
  const bool program = p.allocator && p.inv.forward_in_program_order;
  // Which part of the step the replay follows op by op, and what it takes coarsely, and why.
  std::string order;
  if (program)
    order = p.inv.backward_programs[1].count > 0 ? ", the layers' forward and backward op by op as PyTorch runs them"
            : p.inv.coarse_backward_reason.empty() ? ", the layers' forward op by op as PyTorch runs it"
                                                   : fmt::format(", the layers' forward op by op as PyTorch runs it, their backward "
                                                                 "coarsely ({}: its op order is not written)",
                                                                 p.inv.coarse_backward_reason);
  else if (p.allocator && !p.inv.coarse_forward_reason.empty())
    order = fmt::format(", the layers' buffers coarsely ({}: their op order is not written)", p.inv.coarse_forward_reason);
  const std::string cached = p.allocator ? fmt::format("PyTorch's caching allocator replayed over 3 steps (what it "
                                                       "reserves beyond the tensor peak){}{}",
                                                       order,
                                                       program && p.cublas_workspaces_in_replay
                                                           ? ", the workspaces made where it asks for them"
                                                           : "")
                                          : fmt::format("allocator slack {} of tensor bytes{}", percent(stack.slack_fraction(p.calib)),
                                                        p.allocator_replay_skipped_instances
                                                            ? std::string(" (PyTorch's caching allocator not replayed: "
                                                                          "the model is too large, see the memory above)")
                                                            : std::string());
  a.push_back(fmt::format("runtime overhead: CUDA context {}, cuBLAS workspace {}, {} ({})", gib(p.overhead.cuda_context_bytes),
                          gib(p.overhead.cublas_workspace_bytes), cached,
                          stack.overhead_note(p.calib)));
  const timing_constants& k = p.calib.timing(calibration_name(stack));  // a stack sharing another's runtime reads its
  const bool host_model = k.forward_kernel_seconds > 0 || k.backward_kernel_seconds > 0;
  const std::string shape = k.gemm_half_dim > 0 ? fmt::format(" x m/(m+{0:.0f}) x n/(n+{0:.0f}) x k/(k+{0:.0f})", k.gemm_half_dim)
                                                 : std::string();
  a.push_back(fmt::format("time: each op's FLOPs at a GEMM efficiency of {}{} of the "
                          "{} dense peak (attention kernels {}) or its bytes at {} of the memory bandwidth, whichever is "
                          "longer, plus {:.1f} us per kernel, {} per step{}{} ({} profile, data/calibration.json)",
                          percent(k.gemm_efficiency), shape,
                          dtype_name(p.layout.compute), percent(k.attention_efficiency), percent(k.bandwidth_fraction),
                          k.kernel_seconds * 1e6, duration(k.step_seconds),
                          k.foreach_tensor_seconds > 0
                              ? fmt::format(" and {:.0f} us per parameter tensor in foreach AdamW", k.foreach_tensor_seconds * 1e6)
                              : std::string(),
                          host_model ? fmt::format("; the GPU waits where the host is slower: {:.1f} us of host work per kernel "
                                                   "launched from Python (forward, recomputation), {:.1f} us per kernel from "
                                                   "the autograd engine and the optimizer (host {}, GPU {} a step)",
                                                   k.forward_kernel_seconds * 1e6, k.backward_kernel_seconds * 1e6,
                                                   duration(p.time.breakdown.host_seconds),
                                                   duration(p.time.breakdown.device_seconds))
                                     : std::string(),
                          stack.name));
  if (const std::string derived = derived_time_note(p); !derived.empty()) a.push_back(derived);
  return a;
}

std::string render_plan_text(const plan_report_input& in) {
  const fit_check& check = in.check;
  const plan_result& p = check.plan;
  const model_spec& m = p.model;
  const run_config& run = p.run;
  std::string out;
  // Every line at most report_width columns: a longer one wraps at spaces.
  auto line = [&out]<typename... T>(fmt::format_string<T...> f, T&&... args) {
    const std::string text = fmt::format(f, std::forward<T>(args)...);
    append_wrapped(out, text, continuation_indent(text));
  };
  const double capacity = static_cast<double>(p.gpu.memory_bytes);

  // The answer first: the verdict and the peak, then the speed.
  line("trainplan: {} on {}{} ({})", m.name, run.gpus > 1 ? fmt::format("{} x ", run.gpus) : std::string(),
       p.gpu.description, p.gpu.name);
  const std::string per_gpu = run.gpus > 1 ? " per GPU" : "";
  if (p.peak_bytes <= p.gpu.memory_bytes && !p.host_fits)
    line("Verdict: DOES NOT FIT in CPU memory: peak {}{} fits the GPU, but the host needs {} and has {}", gib(p.peak_bytes),
         per_gpu, gib(p.host_bytes), gib(run.host_memory_bytes));
  else if (p.fits)
    line("Verdict: FITS{}: peak {}{} of {} ({}), {} headroom", check.tight ? ", tight" : "", gib(p.peak_bytes), per_gpu,
         gib(p.gpu.memory_bytes), percent(p.peak_bytes / capacity), gib(static_cast<std::uint64_t>(p.headroom_bytes)));
  else if (p.headroom_bytes >= 0)  // the replay ran out although the peak estimate is below the GPU's memory
    line("Verdict: DOES NOT FIT: PyTorch's caching allocator runs out of memory (peak {}{} of {})", gib(p.peak_bytes),
         per_gpu, gib(p.gpu.memory_bytes));
  else
    line("Verdict: DOES NOT FIT: peak {}{} of {}, short by {}", gib(p.peak_bytes), per_gpu, gib(p.gpu.memory_bytes),
         gib_signed(-p.headroom_bytes));
  if (p.fits && check.tight)
    line("  tight: less than the {} of the GPU that plan search keeps free for what the model does not capture",
         percent(p.calib.safety_margin_fraction));
  line("  at the peak: {}; step {}, {} tokens/s, MFU {}", describe_point(p.timeline.peak, run.grad_accum),
       duration(p.time.step_seconds), grouped_rate(p.time.tokens_per_second), percent(p.time.mfu));
  if (!p.fits && !check.suggestions.empty())
    line("  {} way{} to make it fit below", check.suggestions.size(), check.suggestions.size() == 1 ? "" : "s");
  line("");
  line("  model  {} family: L={} h={} heads={} kv_heads={} head_dim={} ffn={} vocab={}{}{}", family_name(m.family),
       m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn, m.vocab, m.tied_embeddings ? ", tied embeddings" : "",
       m.max_positions ? fmt::format(", {} learned positions", m.max_positions) : "");
  if (const std::string features = model_features_text(m); !features.empty()) line("         {}", features);
  if (m.is_moe())
    line("         {} parameters, {} active per token (12Lh^2+Vh estimate of a dense model: {})", grouped(p.params.total),
         grouped(p.params.active), grouped(p.params.approx_12lh2_vh));
  else
    line("         {} parameters (12Lh^2+Vh estimate: {})", grouped(p.params.total), grouped(p.params.approx_12lh2_vh));
  line("  run    seq {} x micro-batch {} x {} accumulation{} = {} tokens/step", run.seq, run.micro_batch, run.grad_accum,
       run.data_parallel() > 1 ? fmt::format(" x {} data-parallel", run.data_parallel()) : std::string(),
       grouped(static_cast<std::uint64_t>(p.flops.tokens_per_step) * run.data_parallel()));
  line("         framework {}: {}", profile_of(run).name, stack_title(run));
  line("         {}, {}, recompute {}, {} attention, dropout {}{}{}{}", precision_name(run.precision),
       optimizer_name(run.optimizer), recompute_name(run.recompute), attention_name(run.attention), run.dropout,
       run.loss == loss_kind::standard ? std::string() : fmt::format(", loss {}", loss_name(run.loss)),
       run.packing_doc_tokens == 0 ? std::string()
                                   : fmt::format(", packed documents of {} tokens (unmeasured; --explain says how)",
                                                 run.packing_doc_tokens),
       compiles_layers(run) ? ", torch.compile (unmeasured; --explain says how)" : "");
  if (run.gpus > 1 || run.zero > 0 || run.offload != offload_mode::none)
    line("         {} GPU{} = {} data-parallel x {} tensor-parallel{}{} x {} pipeline{}, ZeRO-{}, offload {}; memory below is per GPU{}",
         run.gpus, run.gpus == 1 ? "" : "s", run.data_parallel(), run.tp, run.sequence_parallel ? " (sequence-parallel)" : "",
         run.cp > 1 ? fmt::format(" x {} context-parallel", run.cp) : std::string(), run.pp, run.vpp > 1 ? fmt::format(" (interleaved, {} chunks per GPU)", run.vpp) : std::string(), run.zero, offload_name(run.offload),
         p.pipeline_stage.empty() ? std::string() : fmt::format(" ({})", p.pipeline_stage));
  if (m.is_moe())
    line("         experts: {} per GPU ({} expert-parallel), {}", local_experts(m, run), run.ep,
         run.capacity_factor > 0 ? fmt::format("capacity factor {:g}", run.capacity_factor) : std::string("dropless"));
  if (run.finetune != finetune_kind::full)
    line("         {} fine-tuning: rank {} adapters on {}: {} trainable parameters ({} of the model)", finetune_name(run.finetune),
         run.lora_rank, lora_targets_text(run.lora_targets), grouped(p.trainable_params),
         percent(static_cast<double>(p.trainable_params) / static_cast<double>(p.params.total)));
  for (const std::string& n : in.notes) line("  note   {}", n);
  line("");

  line("Memory at the peak{}: {}", per_gpu, describe_point(p.timeline.peak, run.grad_accum));
  line("  {:<38} {:>18} {:>12} {:>9}", "component", "bytes", "GiB", "% of GPU");
  auto row = [&](const std::string& label, std::uint64_t bytes) {
    line("  {:<38} {:>18} {:>12} {:>9}", label, grouped(bytes), gib(bytes), percent(bytes / capacity));
  };
  // The dtype the inventory holds the first buffer of a role in (a LoRA base and its adapters' gradients
  // need not be in the regime's dtypes: peft keeps adapters in fp32).
  auto dtype_of = [&](auto is_it, dtype otherwise) {
    for (const tensor_spec& t : p.inv.tensors)
      if (is_it(t)) return t.type;
    return otherwise;
  };
  const dtype base_type = dtype_of([](const tensor_spec& t) { return t.role == tensor_role::frozen_weights && t.scope == param_scope::all; },
                                   dtype::bf16);
  std::string weights_label =
      run.finetune == finetune_kind::qlora  ? std::string("weights (NF4 base + adapters)")
      : run.finetune == finetune_kind::lora ? fmt::format("weights ({} base + adapters)", dtype_name(base_type))
                                            : fmt::format("weights ({})", dtype_name(p.layout.weights));
  if (p.layout.fp8_weight_cache) weights_label += " + fp8 copies";
  if (p.layout.autocast_weight_cache) weights_label += fmt::format(" + {} autocast copies", dtype_name(p.layout.compute));
  row(weights_label, p.category_bytes(tensor_category::weights));
  if (p.layout.master) row(fmt::format("master weights ({})", dtype_name(*p.layout.master)),
                           p.category_bytes(tensor_category::master_weights));
  const dtype grads_type = dtype_of([](const tensor_spec& t) {
    return t.role == tensor_role::gradients && (t.scope == param_scope::adapters || t.scope == param_scope::layer_adapters);
  }, p.layout.grads);
  row(fmt::format("gradients ({}{})", dtype_name(grads_type), p.layout.grad_accum ? " + fp32 accumulation" : ""),
      p.category_bytes(tensor_category::gradients));
  row(fmt::format("optimizer state ({})", optimizer_name(run.optimizer)), p.category_bytes(tensor_category::optimizer));
  row("activations (saved for backward)", p.category_bytes(tensor_category::activations));
  row("logits and loss", p.category_bytes(tensor_category::logits));
  row("activation gradients (backward)", p.category_bytes(tensor_category::activation_grads));
  row("runtime overhead", p.overhead.total());
  row("  CUDA context", p.overhead.cuda_context_bytes);
  row("  cuBLAS workspace", p.overhead.cublas_workspace_bytes);
  if (p.overhead.nccl_bytes > 0) row("  NCCL buffers", p.overhead.nccl_bytes);
  row(p.allocator ? std::string("  allocator cache, unused (replay)")
                  : fmt::format("  allocator slack ({} of tensors)", percent(profile_of(p.run).slack_fraction(p.calib))),
      p.overhead.allocator_slack_bytes);
  line("  {:-<80}", "");
  row("peak", p.peak_bytes);
  line("  {:<38} {:>18} {:>12}", "GPU memory", grouped(p.gpu.memory_bytes), gib(p.gpu.memory_bytes));
  if (p.allocator_replay_skipped_instances)
    line("  PyTorch's caching allocator is not replayed: {} buffer instances over 3 steps are more than the {} a replay "
         "takes; the peak is the tensors plus {} slack", grouped(p.allocator_replay_skipped_instances),
         grouped(max_replayed_instances), percent(profile_of(p.run).slack_fraction(p.calib)));
  if (p.allocator) {
    const allocator_replay& a = *p.allocator;
    const bool expandable = p.run.expandable_segments;
    const char* who = expandable ? "PyTorch's caching allocator with expandable segments" : "PyTorch's caching allocator";
    const char* release = expandable ? "unmapping its free pages" : "freeing its cached segments";
    std::string replay =
        a.out_of_memory
            ? fmt::format("  {}, replayed over 3 steps, needs {} to complete them (the least memory in which it does, {} "
                          "as it runs short; the peak is the CUDA context plus that)", who, gib(p.allocator_reserved_bytes), release)
        : a.budget_reserved_bytes > a.peak_reserved_bytes
            ? fmt::format("  {}, replayed over 3 steps, completes them in {} (the least memory in which it does, {} as it "
                          "runs short; the peak is the CUDA context plus that); in all of the GPU's memory it keeps more "
                          "of its cache: {} reserved at most, what max_memory_reserved() would read", who,
                          gib(p.allocator_reserved_bytes), release,
                          gib(a.budget_reserved_bytes + p.overhead.cublas_workspace_bytes))
            : fmt::format("  {}, replayed over 3 steps in what the GPU leaves it, reserves {} at most (the peak is the "
                          "CUDA context plus that)", who, gib(p.allocator_reserved_bytes));
    if (a.cache_releases > 0)
      replay += fmt::format("{} runs short {} and {} (each time a device synchronization: slower steps)",
                            a.out_of_memory ? "; in all of the GPU's memory it" : ", and",
                            a.cache_releases == 1 ? std::string("once") : fmt::format("{} times", a.cache_releases),
                            expandable ? "unmaps its free pages" : "frees its unused cached segments");
    if (a.out_of_memory) {
      // A layer's buffer is named for every layer ("layer{}.x"): which layer failed is not kept.
      std::string failed(a.failed_tensor);
      if (const std::size_t at = failed.find("{}"); at != std::string::npos) failed.replace(at, 2, "<n>");
      replay += fmt::format("{} {}'s {} finds no room even then: out of memory", a.cache_releases > 0 ? ", and" : "; in the GPU's memory",
                            a.failed_step < 0 ? std::string("creating the model") : fmt::format("step {}", a.failed_step + 1),
                            failed);
    }
    line("{}", replay);
    // What the measurements say of the replay (planner/evaluate/plan.hpp, hf_loss_segment_bytes).
    if (p.loss_segment_bytes)
      line("  Its known error: against PyTorch on an H100, its larger misses were about one segment of the loss's "
           "[b*s, V] fp32 size; here {}",
           gib(*p.loss_segment_bytes));
    // Where the run sits on an edge, the process's history decides a segment (planner/evaluate/plan.hpp).
    if (p.allocator_edge) {
      const double now = static_cast<double>(p.allocator_reserved_bytes);
      const double then = static_cast<double>(*p.reserved_after_another_run_bytes);
      line("  After another run in the same process (PyTorch's cuBLAS workspaces made already, as in a notebook that "
           "trains twice) it reserves {} ({:+.2f} GiB): this run sits on an edge of the allocator, where one block's "
           "place decides a segment (a measured GPT-2 reserved 5.39 GiB in a process of its own, 4.65 GiB after another run)",
           gib(*p.reserved_after_another_run_bytes), (then - now) / 1073741824.0);
    }
    const std::uint64_t fixed = p.overhead.cuda_context_bytes + p.overhead.cublas_workspace_bytes;
    if (a.out_of_memory && a.tensors_fit && !expandable)
      line("  The tensors fit: with the context and workspaces they need {} at most (in the allocator's blocks); what is "
           "missing is memory the allocator holds in segments split by live tensors. "
           "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets PyTorch grow one segment by mapping pages instead "
           "(--expandable-segments replays it)",
           gib(a.peak_allocated_bytes + fixed));
    else if (a.out_of_memory && a.tensors_fit)
      line("  The tensors fit: with the context and workspaces they need {} at most (in the allocator's blocks); what is "
           "missing is memory mapped in 20 MiB pages that live tensors hold in part, in free pieces smaller than the "
           "request that failed", gib(a.peak_allocated_bytes + fixed));
  }
  line("");
  if (m.dense_layers == 0)
    line("  one layer keeps {} from its forward to its backward (x {} layers = {})", gib(p.inv.activations_per_layer_bytes),
         p.inv.layers, gib(p.inv.activations_all_layers_bytes));
  else  // DeepSeek's dense first layers keep other buffers than its MoE layers
    line("  an MoE layer keeps {} from its forward to its backward; the {} layers, dense ones included, keep {}",
         gib(p.inv.activations_per_layer_bytes), p.inv.layers, gib(p.inv.activations_all_layers_bytes));

  std::vector<live_tensor> largest = p.timeline.live_at_peak;
  std::sort(largest.begin(), largest.end(), [](const live_tensor& x, const live_tensor& y) { return x.bytes > y.bytes; });
  line("  largest buffers live at the peak:");
  for (std::size_t i = 0; i < std::min<std::size_t>(6, largest.size()); ++i) {
    const live_tensor& t = largest[i];
    line("    {:<32} {:>18} {:<5} {:>10}{}", t.spec->name, shape_text(t.spec->shape), dtype_name(t.spec->type),
         gib(t.bytes), t.instances > 1 ? fmt::format("  ({} layers)", t.instances) : "");
  }
  line("");

  if (!p.inv.host_tensors.empty())
    line("  offloaded to CPU memory: {}{}", gib(p.host_bytes),
         run.host_memory_bytes ? fmt::format(" of the {} given by --host-memory{}", gib(run.host_memory_bytes),
                                             p.host_fits ? "" : ": DOES NOT FIT")
                               : " (give --host-memory to check it)");
  if (!p.inv.host_tensors.empty()) line("");

  const step_flops& f = p.flops;
  line("Compute per step: model {} FLOPs (dense layers {} + attention {})", scientific(f.model_per_step),
       scientific(f.model_gemm_per_step), scientific(f.model_attention_per_step));
  line("  hardware {} FLOPs (recompute +{}{})", scientific(f.hardware_per_step), percent(f.recompute_per_step / f.model_per_step),
       f.masked_attention_per_step > 0
           ? fmt::format(", scores outside the sliding window computed and masked +{}", percent(f.masked_attention_per_step / f.model_per_step))
           : std::string());
  const comm_time& comm = p.time.communication;
  line("  step {} ({} compute on {:.0f} TFLOP/s {} + {} optimizer{}{})", duration(p.time.step_seconds),
       duration(p.time.compute_seconds), p.time.peak_flops_per_s / 1e12, dtype_name(p.layout.compute),
       duration(p.time.optimizer_seconds),
       p.time.offload_seconds > 0 ? fmt::format(" + {} PCIe offload", duration(p.time.offload_seconds)) : std::string(),
       comm.seconds > 0 ? fmt::format(" + {} communication", duration(comm.exposed_seconds + comm.slowdown_seconds))
                        : std::string());
  line("  -> {} tokens/s, MFU {}, HFU {}", grouped_rate(p.time.tokens_per_second), percent(p.time.mfu), percent(p.time.hfu));
  if (comm.seconds > 0) {
    std::string groups;
    for (std::size_t g = 0; g < comm_group_count; ++g)
      if (comm.seconds_by_group[g] > 0)
        groups += fmt::format("{}{} {} ({} exposed)", groups.empty() ? "" : ", ", comm_group_name(static_cast<comm_group>(g)),
                              duration(comm.seconds_by_group[g]), duration(comm.exposed_by_group[g]));
    line("  communication: {} of collectives, {} hidden behind compute (slowing it {} for the SMs NCCL holds); {}",
         duration(comm.seconds), duration(comm.hidden_seconds), duration(comm.slowdown_seconds), groups);
  }
  {
    std::string parts;
    const double total = p.time.breakdown.total();
    for (std::size_t c = 0; c < op_class_count; ++c) {
      const double sec = p.time.breakdown.seconds[c];
      if (sec <= 0) continue;
      parts += fmt::format("{}{} {} ({})", parts.empty() ? "" : ", ", op_class_name(static_cast<op_class>(c)),
                           duration(sec), percent(total > 0 ? sec / total : 0));
    }
    line("  by op class: {}", parts);
    // Where the host's work alone outlasts the GPU's, the step is the host's (planner/time/roofline.hpp).
    const op_time_breakdown& b = p.time.breakdown;
    if (b.host_bound())
      line("  bound by the host: {} of host work (Python dispatch, the autograd engine) against {} of GPU work a step; "
           "a larger micro-batch fills the GPU's idle time first",
           duration(b.host_work_seconds), duration(b.device_seconds));
  }
  if (check.training)
    line("  {} tokens take {} on {} ({} steps)", scientific(check.training->tokens), duration(check.training->seconds),
         run.gpus == 1 ? std::string("this one GPU") : fmt::format("{} GPUs", run.gpus), grouped(check.training->steps));
  line("");

  const std::vector<fit_suggestion>& suggestions = check.suggestions;
  if (!p.fits) {
    if (suggestions.empty() && in.suggestions_requested == 0) {
      line("What would make it fit: not searched (--suggestions 0).");
    } else if (suggestions.empty()) {
      std::string why = in.levers_kept ? "What would make it fit: no combination of up to three changes to the levers "
                                         "--keep leaves free fits."
                                       : "What would make it fit: no combination of up to three changes (recompute, "
                                         "micro-batch, precision, optimizer, loss, more GPUs, offload, adapters) fits.";
      // Advice about model state only where it is what fills the GPU.
      if (check.model_state_fills_gpu)
        why += fmt::format(" Model state alone needs {} at the peak; shard it across more GPUs{}: `plan search "
                           "--gpus N` with this run's options ranks every tensor, pipeline and data-parallel layout of "
                           "N GPUs.",
                           gib(p.model_state_bytes()), run.finetune == finetune_kind::full ? " or train adapters instead" : "");
      line("{}", why);
    } else {
      line("What would make it fit (same numerics first, then changed numerics, then more GPUs; a + line adds what "
           "reaches the most headroom with the same numerics):");
      if (check.same_numerics_floor_bytes)
        line("  nothing that keeps the numerics fits on {} at full speed: full recomputation with micro-batch 1 "
             "still peaks at {}",
             run.gpus == 1 ? fmt::format("one {}", p.gpu.name) : fmt::format("{} {}s as laid out", run.gpus, p.gpu.name),
             gib(*check.same_numerics_floor_bytes));
      for (std::size_t i = 0; i < suggestions.size(); ++i) {
        const fit_suggestion& s = suggestions[i];
        // The whole command to paste: the options given, the suggestion's in their place.
        std::string changes;
        for (const std::string& c : s.changes) changes += (changes.empty() ? "" : " ") + c;
        const std::string command = in.command.empty() ? changes : shell_line(suggested_command(in.command, s.changes));
        const std::string number = fmt::format("  {}. ", i + 1);
        append_wrapped(out, number + command, number.size(), report_width, " \\");
        line("{:{}}peak {}, headroom {}, {} tokens/s ({}{})", "", number.size(), gib(s.peak_bytes),
             gib(static_cast<std::uint64_t>(s.headroom_bytes)), grouped_rate(s.tokens_per_second),
             suggestion_cost_text(s.costs), s.tight ? ", tight" : "");
        // Its roomiest form: the options to add for the most headroom these numerics reach.
        if (s.roomiest) {
          std::string added;
          for (const std::string& c : s.roomiest->added) added += (added.empty() ? "" : " ") + c;
          line("{:{}}+ {}: peak {}, headroom {}, {} tokens/s{}", "", number.size(), added, gib(s.roomiest->peak_bytes),
               gib_signed(s.roomiest->headroom_bytes), grouped_rate(s.roomiest->tokens_per_second),
               s.roomiest->tight ? ", tight" : "");
        }
      }
    }
    line("");
  }
  if (in.explain) {
    line("Assumptions:");
    for (const std::string& a : plan_assumptions(p)) line("  - {}", a);
  } else {
    line("Assumptions (--explain gives the full account):");
    for (const std::string& a : plan_assumptions_summary(p)) line("  - {}", a);
  }
  return out;
}

}  // namespace trainplan::cli
