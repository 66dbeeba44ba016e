// The chunks of the losses that never build the whole logits at once (hf_loss_chunks.hpp).
#include "planner/profiles/hf/hf_loss_chunks.hpp"

#include <fmt/format.h>

#include "planner/util/input_error.hpp"

namespace trainplan {
namespace {

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return a / b + (a % b != 0); }

std::uint64_t next_power_of_2(std::uint64_t x) {
  std::uint64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

}  // namespace

std::uint64_t chunked_loss_rows(const run_config& run, std::uint64_t chunks, std::uint64_t i) {
  // torchtune's TransformerDecoder.chunked_output: last_hidden_state.tensor_split(num_output_chunks, dim=1), each
  // [b, s_i, h] with s_i = s / n, the first s % n of them one longer (torch.tensor_split's documented split).
  return run.micro_batch * (run.seq / chunks + (i < run.seq % chunks ? 1 : 0));
}

void check_hf_loss(std::string_view stack, const run_config& run) {
  if (run.loss != loss_kind::chunked || run.loss_chunks == 0) return;
  if (run.loss_chunks > run.seq)
    throw input_error(fmt::format("--loss-chunks {} is more than --seq {}: --framework {} splits the sequence into that "
                                  "many chunks", run.loss_chunks, run.seq, stack));
}

hf_loss_chunking hf_loss_chunks(const model_spec& m, const run_config& run) {
  const std::uint64_t tokens = run.micro_batch * run.seq;
  switch (run.loss) {
    case loss_kind::standard: return {1, tokens};
    case loss_kind::chunked: {
      const std::uint64_t n = run.loss_chunks ? run.loss_chunks : torchtune_default_loss_chunks;
      return {n, chunked_loss_rows(run, n, 0)};
    }
    case loss_kind::fused_linear: {
      // Liger's fused_linear_cross_entropy_forward (liger_kernel/ops/fused_linear_cross_entropy.py) bounds a
      // chunk's logits to about BT x H elements: inc_factor = cdiv(V, chunk_mem_const * H) with chunk_mem_const 1
      // by default, chunk_size = next_power_of_2(cdiv(BT, inc_factor)), at most BT, and cdiv(BT, chunk_size) chunks.
      const std::uint64_t h = m.hidden ? m.hidden : 1;
      const std::uint64_t inc_factor = ceil_div(m.vocab, h);
      std::uint64_t chunk = next_power_of_2(ceil_div(tokens, inc_factor ? inc_factor : 1));
      if (chunk > tokens) chunk = tokens;
      if (chunk == 0) return {1, 0};
      return {ceil_div(tokens, chunk), chunk};
    }
  }
  return {1, tokens};
}

std::string hf_loss_line(const model_spec& m, const run_config& run) {
  if (run.loss == loss_kind::standard) return {};
  const hf_loss_chunking c = hf_loss_chunks(m, run);
  if (run.loss == loss_kind::chunked && compiles_loss(run))
    return fmt::format(
        "loss: torchtune's chunked output and CEWithChunkedOutputLoss in {} chunks of the sequence (at most {} "
        "tokens), compute_cross_entropy compiled: each chunk's graph saves its bf16 logits (kept until the head's "
        "backward) and their logsumexp, no fp32 copy",
        c.chunks, c.largest_rows);
  if (run.loss == loss_kind::chunked)
    return fmt::format(
        "loss: torchtune's chunked output and CEWithChunkedOutputLoss in {} chunks of the sequence (at most {} "
        "tokens): each chunk's bf16 logits upcast to fp32 and cross-entropied in turn, every chunk's fp32 "
        "log-softmax saved for backward, the logits freed before backward (its recipes' `del logits`); run eagerly "
        "(a --compile scope that compiles the loss compiles it)",
        c.chunks, c.largest_rows);
  return fmt::format(
        "loss: Liger's fused linear cross-entropy in {} chunks of {} tokens (its chunk size from the vocabulary and "
        "hidden size): no logits kept, the head's input and weight gradients computed in the forward and saved "
        "(the weight's in its own dtype); Liger's other kernels (RMSNorm, RoPE, SwiGLU) are not modelled: the "
        "layers stay PyTorch's",
        c.chunks, c.largest_rows);
}

}  // namespace trainplan
