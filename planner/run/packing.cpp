// Documents in a packed row and the attention they need (packing.hpp).
#include "planner/run/packing.hpp"

#include <algorithm>

namespace trainplan {

packed_row packed_row_of(std::uint64_t seq, std::uint64_t doc_tokens) {
  packed_row r;
  if (doc_tokens == 0 || doc_tokens >= seq) {
    r.doc_tokens = seq;
    return r;
  }
  // TRL's packing fills each row with whole documents; documents of one length fill it with seq / d of
  // them and the first part of the next one (its remainder), which starts no new row's attention.
  r.full_documents = seq / doc_tokens;
  r.doc_tokens = doc_tokens;
  r.remainder_tokens = seq % doc_tokens;
  return r;
}

packed_row packed_row_of(const run_config& run) { return packed_row_of(run.seq, run.packing_doc_tokens); }

bool packs_documents(const run_config& run) { return packed_row_of(run).documents() > 1; }

double packed_attended_key_sum(const packed_row& row, std::uint64_t window) {
  // Each query of a document sees the keys of its own document only (causal within it; the square counted),
  // and within a sliding window at most `window` of them (Mistral's window inside each document).
  auto keys = [&](std::uint64_t d) {
    const double dd = static_cast<double>(d);
    return dd * (window > 0 ? std::min(dd, static_cast<double>(window)) : dd);
  };
  return static_cast<double>(row.full_documents) * keys(row.doc_tokens) + keys(row.remainder_tokens);
}

}  // namespace trainplan
