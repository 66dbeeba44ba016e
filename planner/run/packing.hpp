#pragma once
// Sequence packing (TRL's SFTTrainer packing=True, padding-free): documents concatenated into rows of `seq`
// tokens, each document's position_ids restarting at 0, so that attention stays within a document
// (transformers: flash_attn_varlen_func over cu_seqlens, or SDPA with a block-diagonal causal mask).
#include <cstdint>

#include "planner/run/run_config.hpp"

namespace trainplan {

// A row of `seq` tokens packed with documents of `doc_tokens` each, the last one the remainder
// (doc_tokens 0, or not below seq: one document, the whole row).
struct packed_row {
  std::uint64_t full_documents = 1;    // documents of doc_tokens
  std::uint64_t doc_tokens = 0;        // their length
  std::uint64_t remainder_tokens = 0;  // the last, shorter document (0: none)
  std::uint64_t documents() const { return full_documents + (remainder_tokens > 0 ? 1 : 0); }
};
packed_row packed_row_of(std::uint64_t seq, std::uint64_t doc_tokens);
packed_row packed_row_of(const run_config& run);  // run.seq, run.packing_doc_tokens
// Whether a row holds more than one document: only then do transformers' position_ids checks see packing
// (a row of one document runs as an unpacked one).
bool packs_documents(const run_config& run);

// The keys the row's queries attend to, summed over its tokens, in the square convention of
// planner/time/flops.hpp (a document of d tokens counts d x d, no causal discount), each query seeing at most
// `window` keys (0: no window): sum over the documents of d x min(d, window). Unpacked: seq x min(seq, window).
double packed_attended_key_sum(const packed_row& row, std::uint64_t window = 0);

}  // namespace trainplan
