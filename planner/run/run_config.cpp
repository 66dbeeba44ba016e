#include "planner/run/run_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "planner/util/input_error.hpp"

namespace trainplan {

std::string_view recompute_name(recompute_mode r) {
  switch (r) {
    case recompute_mode::none: return "none";
    case recompute_mode::selective: return "selective";
    case recompute_mode::full: return "full";
  }
  return "?";
}

recompute_mode parse_recompute(std::string_view text) {
  if (text == "none") return recompute_mode::none;
  if (text == "selective") return recompute_mode::selective;
  if (text == "full") return recompute_mode::full;
  throw input_error(fmt::format("--recompute: unknown mode '{}' (known: none, selective, full)", text));
}

std::string_view offload_name(offload_mode o) {
  switch (o) {
    case offload_mode::none: return "none";
    case offload_mode::optimizer: return "optimizer";
    case offload_mode::params: return "params";
    case offload_mode::both: return "both";
  }
  return "?";
}

offload_mode parse_offload(std::string_view text) {
  for (offload_mode o : {offload_mode::none, offload_mode::optimizer, offload_mode::params, offload_mode::both})
    if (offload_name(o) == text) return o;
  throw input_error(fmt::format("--offload: unknown mode '{}' (known: none, optimizer, params, both)", text));
}

std::string_view finetune_name(finetune_kind f) {
  return f == finetune_kind::full ? "full" : f == finetune_kind::lora ? "lora" : "qlora";
}

finetune_kind parse_finetune(std::string_view text) {
  for (finetune_kind f : {finetune_kind::full, finetune_kind::lora, finetune_kind::qlora})
    if (finetune_name(f) == text) return f;
  throw input_error(fmt::format("--finetune: unknown kind '{}' (known: full, lora, qlora)", text));
}

unsigned parse_lora_targets(std::string_view text) {
  unsigned out = 0;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, end - start);
    if (item == "q") out |= lora_q;
    else if (item == "k") out |= lora_k;
    else if (item == "v") out |= lora_v;
    else if (item == "o") out |= lora_o;
    else if (item == "mlp") out |= lora_mlp;
    else throw input_error(fmt::format("--lora-targets: unknown target '{}' (known: q, k, v, o, mlp)", item));
    start = end + 1;
  }
  return out;
}

std::string lora_targets_text(unsigned t) {
  std::string out;
  for (auto [bit, name] : {std::pair{lora_q, "q"}, {lora_k, "k"}, {lora_v, "v"}, {lora_o, "o"}, {lora_mlp, "mlp"}})
    if (t & bit) {
      if (!out.empty()) out += ',';
      out += name;
    }
  return out;
}

std::string_view attention_name(attention_kind a) { return a == attention_kind::eager ? "eager" : "flash"; }

attention_kind parse_attention(std::string_view text) {
  if (text == "eager") return attention_kind::eager;
  if (text == "flash") return attention_kind::flash;
  throw input_error(fmt::format("--attention: unknown kind '{}' (known: eager, flash)", text));
}

void check_parallel_layout(const run_config& run) {
  if (run.gpus == 0 || run.tp == 0 || run.pp == 0) throw input_error("--gpus, --tp and --pp must be at least 1");
  // The largest clusters have some 10^5 GPUs; more is a typo (4,294,967,297 once planned a run that fits).
  constexpr std::uint64_t max_gpus = 1ull << 20;
  if (run.gpus > max_gpus) throw input_error(fmt::format("--gpus {} is beyond any real cluster (limit {})", run.gpus, max_gpus));
  if (run.pp > run.gpus / run.tp || run.gpus % (run.tp * run.pp) != 0)  // first test: tp*pp must not wrap to 0
    throw input_error(fmt::format("--gpus {} is not a multiple of --tp {} x --pp {}", run.gpus, run.tp, run.pp));
}

}  // namespace trainplan
