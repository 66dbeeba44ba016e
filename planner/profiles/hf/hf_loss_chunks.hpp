#pragma once
// How the losses that never build the whole logits at once split a micro-batch (run_config's loss_kind):
// torchtune's chunked output and Liger's fused linear cross-entropy. Each chunk's logits are the largest
// buffer either makes; the hf profile's head operations (hf_head_ops.cpp) size their rows and kernels from this.
#include <cstdint>

#include <string>
#include <string_view>

#include "planner/model/model_spec.hpp"
#include "planner/run/run_config.hpp"

namespace trainplan {

// torchtune's CEWithChunkedOutputLoss: num_output_chunks = 8 unless configured.
inline constexpr std::uint64_t torchtune_default_loss_chunks = 8;

struct hf_loss_chunking {
  std::uint64_t chunks = 1;          // chunks of one micro-batch (1: the standard loss, all tokens at once)
  std::uint64_t largest_rows = 0;    // token rows (of b * s) in the largest chunk
};

// The chunks of `run`'s loss over one micro-batch of `m`.
hf_loss_chunking hf_loss_chunks(const model_spec& m, const run_config& run);
// loss_kind::chunked: the token rows of chunk `i` (torch.tensor_split of the sequence into `chunks` parts: the
// first seq % chunks parts one position longer).
std::uint64_t chunked_loss_rows(const run_config& run, std::uint64_t chunks, std::uint64_t i);

// Throws input_error naming the option (and `stack`) for a --loss-chunks the chunked loss cannot take.
void check_hf_loss(std::string_view stack, const run_config& run);

// The report's line on the loss; empty for the standard loss.
std::string hf_loss_line(const model_spec& m, const run_config& run);

}  // namespace trainplan
