// The CPU reference of the token and position embeddings (embedding.hpp): the gather, and the backward's
// scatter-add summed in fp32 scratch and added to the stored gradients once; a token outside the table throws.
#include "kernels/embedding.hpp"

#include <stdexcept>
#include <string>

namespace trainplan::kernels {
namespace {

// A token id outside the table would read or write past it: refused, never clamped.
std::size_t checked_token(const view& tokens, std::size_t i, std::size_t vocab) {
  const std::int32_t id = tokens.get_i32(i);
  if (id < 0 || static_cast<std::size_t>(id) >= vocab)
    throw std::invalid_argument("embedding: token id " + std::to_string(id) + " at position " + std::to_string(i) +
                                " is outside the vocabulary of " + std::to_string(vocab));
  return static_cast<std::size_t>(id);
}

}  // namespace

void embedding_forward(const view& tokens, const view& wte, const view& wpe, const view& out, std::size_t batch,
                       std::size_t seq, std::size_t width) {
  const std::size_t vocab = width ? wte.size / width : 0;
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t t = 0; t < seq; ++t) {
      const std::size_t token = checked_token(tokens, b * seq + t, vocab);
      for (std::size_t e = 0; e < width; ++e) {
        float x = wte.get(token * width + e);
        if (wpe.data) x += wpe.get(t * width + e);
        out.set((b * seq + t) * width + e, x);
      }
    }
}

void embedding_backward(const view& tokens, const view& d_out, const view& d_wte, const view& d_wpe, const view& scratch,
                        std::size_t batch, std::size_t seq, std::size_t width, std::size_t vocab) {
  const std::size_t wte_n = vocab * width, wpe_n = d_wpe.data ? seq * width : 0;
  if (scratch.size < wte_n + wpe_n) throw std::invalid_argument("embedding backward: the fp32 scratch is too small");
  const view dwte = scratch.slice(0, wte_n), dwpe = scratch.slice(wte_n, wpe_n);
  for (std::size_t i = 0; i < wte_n + wpe_n; ++i) scratch.set(i, 0.0f);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t t = 0; t < seq; ++t) {
      const std::size_t token = checked_token(tokens, b * seq + t, vocab);
      for (std::size_t e = 0; e < width; ++e) {
        const float g = d_out.get((b * seq + t) * width + e);
        dwte.add(token * width + e, g);
        if (wpe_n) dwpe.add(t * width + e, g);
      }
    }
  // Rows of tokens not seen add zero, which leaves a stored value as it was in every dtype.
  for (std::size_t i = 0; i < wte_n; ++i) d_wte.add(i, dwte.get(i));
  for (std::size_t i = 0; i < wpe_n; ++i) d_wpe.add(i, dwpe.get(i));
}

}  // namespace trainplan::kernels
