// The run's small parsers and checks (run_config.hpp): --lora-targets to and from its text, and the GPU
// layout's check (--gpus a multiple of --tp x --cp x --pp).
#include "planner/run/run_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "planner/util/input_error.hpp"
#include "planner/util/names.hpp"

namespace trainplan {

namespace {

constexpr named<recompute_mode> recompute_names[] = {
    {recompute_mode::none, "none"}, {recompute_mode::selective, "selective"}, {recompute_mode::full, "full"}};
constexpr named<offload_mode> offload_names[] = {
    {offload_mode::none, "none"}, {offload_mode::optimizer, "optimizer"}, {offload_mode::params, "params"},
    {offload_mode::both, "both"}};
constexpr named<finetune_kind> finetune_names[] = {
    {finetune_kind::full, "full"}, {finetune_kind::lora, "lora"}, {finetune_kind::qlora, "qlora"}};
// "sdpa": Hugging Face's name (attn_implementation="sdpa") for what the Hugging Face stack models as flash (PyTorch's
// scaled_dot_product_attention picks a fused kernel); the first name of a kind is the one printed.
// "flash_attention_2": transformers' name for the flash-attn package's kernels.
constexpr named<attention_kind> attention_names[] = {{attention_kind::eager, "eager"},
                                                     {attention_kind::flash, "flash"},
                                                     {attention_kind::flash, "sdpa"},
                                                     {attention_kind::flash_attention_2, "flash_attention_2"}};
constexpr named<loss_kind> loss_names[] = {
    {loss_kind::standard, "standard"}, {loss_kind::chunked, "chunked"}, {loss_kind::fused_linear, "fused-linear"}};
constexpr named<compile_scope> compile_scope_names[] = {{compile_scope::none, "none"},
                                                       {compile_scope::model, "model"},
                                                       {compile_scope::layers, "layers"},
                                                       {compile_scope::layers_and_loss, "layers+loss"}};
constexpr named<unsigned> lora_target_names[] = {
    {lora_q, "q"}, {lora_k, "k"}, {lora_v, "v"}, {lora_o, "o"}, {lora_mlp, "mlp"}};

}  // namespace

std::string_view recompute_name(recompute_mode r) { return name_of(recompute_names, r); }
recompute_mode parse_recompute(std::string_view text) { return parse_named(recompute_names, text, "--recompute", "mode"); }

std::string_view offload_name(offload_mode o) { return name_of(offload_names, o); }
offload_mode parse_offload(std::string_view text) { return parse_named(offload_names, text, "--offload", "mode"); }

std::string_view finetune_name(finetune_kind f) { return name_of(finetune_names, f); }
finetune_kind parse_finetune(std::string_view text) { return parse_named(finetune_names, text, "--finetune", "kind"); }

unsigned parse_lora_targets(std::string_view text) {
  unsigned out = 0;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, end - start);
    out |= parse_named(lora_target_names, item, "--lora-targets", "target");
    start = end + 1;
  }
  return out;
}

std::string lora_targets_text(unsigned t) {
  std::string out;
  for (const named<unsigned>& target : lora_target_names)
    if (t & target.value) {
      if (!out.empty()) out += ',';
      out += target.name;
    }
  return out;
}

std::string_view attention_name(attention_kind a) { return name_of(attention_names, a); }
attention_kind parse_attention(std::string_view text) { return parse_named(attention_names, text, "--attention", "kind"); }

std::string_view loss_name(loss_kind l) { return name_of(loss_names, l); }
loss_kind parse_loss(std::string_view text) { return parse_named(loss_names, text, "--loss", "kind"); }

std::string_view compile_scope_name(compile_scope c) { return name_of(compile_scope_names, c); }
compile_scope parse_compile_scope(std::string_view text) {
  return parse_named(compile_scope_names, text, "--compile", "scope");
}

void check_parallel_layout(const run_config& run) {
  if (run.gpus == 0 || run.tp == 0 || run.pp == 0) throw input_error("--gpus, --tp and --pp must be at least 1");
  if (run.cp == 0) throw input_error("--cp must be at least 1");
  // The largest clusters have some 10^5 GPUs; more is a typo (4,294,967,297 once planned a run that fits).
  constexpr std::uint64_t max_gpus = 1ull << 20;
  if (run.gpus > max_gpus) throw input_error(fmt::format("--gpus {} is beyond any real cluster (limit {})", run.gpus, max_gpus));
  if (run.pp > run.gpus / run.tp || run.gpus % (run.tp * run.pp) != 0)  // first test: tp*pp must not wrap to 0
    throw input_error(fmt::format("--gpus {} is not a multiple of --tp {} x --pp {}", run.gpus, run.tp, run.pp));
  if (run.cp > 1 && (run.cp > run.gpus / (run.tp * run.pp) || run.gpus % (run.tp * run.pp * run.cp) != 0))
    throw input_error(fmt::format("--gpus {} is not a multiple of --tp {} x --cp {} x --pp {}", run.gpus, run.tp, run.cp, run.pp));
}

}  // namespace trainplan
