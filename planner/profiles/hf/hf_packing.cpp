// Sequence packing under transformers' modules (hf_packing.hpp).
#include "planner/profiles/hf/hf_packing.hpp"

#include <fmt/format.h>

#include "planner/profiles/hf/hf_sdpa.hpp"
#include "planner/run/packing.hpp"
#include "planner/time/flops.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {

void check_hf_packing(std::string_view stack, const run_config& run) {
  if (run.packing_doc_tokens == 0) return;
  // TRL packs padding-free for flash attention: SFTTrainer warns that only the flash attention implementations
  // reliably keep packed documents apart; transformers' eager path materialises the whole [b, a, s, s] scores,
  // which this planner does not model with a packed mask.
  if (run.attention == attention_kind::eager)
    throw input_error(fmt::format("--packing with --attention eager is not modelled under --framework {}: packed "
                                  "documents need --attention sdpa or flash_attention_2",
                                  stack));
}

std::string hf_packing_line(const model_spec& m, const run_config& run, const precision_layout& layout) {
  if (run.packing_doc_tokens == 0) return {};
  const packed_row row = packed_row_of(run);
  if (row.documents() == 1)
    return fmt::format("packing: documents of {} tokens fill a row of --seq {} alone: each row is one sequence, as "
                       "unpacked (transformers finds no packing in its position_ids)",
                       run.packing_doc_tokens, run.seq);
  const std::string docs = row.remainder_tokens > 0
                               ? fmt::format("{} documents of {} tokens and one of {}", row.full_documents, row.doc_tokens,
                                             row.remainder_tokens)
                               : fmt::format("{} documents of {} tokens", row.full_documents, row.doc_tokens);
  const double share = attended_keys(m, run.seq, run.packing_doc_tokens) / attended_keys(m, run.seq);
  std::string how;
  if (run.attention == attention_kind::flash_attention_2) {
    how = fmt::format("the flash-attn package's flash_attn_varlen_func over cu_seqlens computes each document's causal "
                      "attention alone: {:.1f}% of the unpacked rows' attention FLOPs; it saves an int32 cu_seqlens per "
                      "layer beside the fp32 log-sum-exp [heads, tokens]",
                      100 * share);
  } else {
    how = fmt::format("transformers builds a block-diagonal causal mask [b,1,s,s] (masking_utils), so SDPA runs its {} "
                      "kernel without is_causal over every tile of the row, k and v repeated to every head and the mask "
                      "saved as a bias in each layer: the model's attention FLOPs are {:.1f}% of the unpacked rows', but the "
                      "kernel computes every tile of the s x s square, twice an unpacked causal row's",
                      hf_sdpa_kernel_name(hf_sdpa_backend(m, run, layout), run), 100 * share);
    // TRL's padding-free collator flattens a micro-batch into one row, whose mask is (b s) x (b s).
    if (run.micro_batch > 1)
      how += "; each of the micro-batch's rows has its own mask (TRL's padding-free collator flattens a micro-batch "
             "into one row, whose mask is the square of all its tokens: --micro-batch 1 models it)";
  }
  return fmt::format("packing: each row of {} tokens holds {} (TRL's packing, position_ids restarting at each "
                     "document); {}; not yet checked against a measurement",
                     run.seq, docs, how);
}

}  // namespace trainplan
