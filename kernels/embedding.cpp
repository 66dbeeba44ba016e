#include "kernels/embedding.hpp"

#include <vector>

namespace trainplan::kernels {

void embedding_forward(const view& tokens, const view& wte, const view& wpe, const view& out, std::size_t batch,
                       std::size_t seq, std::size_t width) {
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t t = 0; t < seq; ++t) {
      const auto token = static_cast<std::size_t>(tokens.get_i32(b * seq + t));
      for (std::size_t e = 0; e < width; ++e) {
        float x = wte.get(token * width + e);
        if (wpe.data) x += wpe.get(t * width + e);
        out.set((b * seq + t) * width + e, x);
      }
    }
}

void embedding_backward(const view& tokens, const view& d_out, const view& d_wte, const view& d_wpe, std::size_t batch,
                        std::size_t seq, std::size_t width, std::size_t vocab) {
  std::vector<float> dwte(vocab * width, 0.0f), dwpe(d_wpe.data ? seq * width : 0, 0.0f);
  std::vector<bool> touched(vocab, false);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t t = 0; t < seq; ++t) {
      const auto token = static_cast<std::size_t>(tokens.get_i32(b * seq + t));
      touched[token] = true;
      for (std::size_t e = 0; e < width; ++e) {
        const float g = d_out.get((b * seq + t) * width + e);
        dwte[token * width + e] += g;
        if (d_wpe.data) dwpe[t * width + e] += g;
      }
    }
  for (std::size_t v = 0; v < vocab; ++v)
    if (touched[v])
      for (std::size_t e = 0; e < width; ++e) d_wte.add(v * width + e, dwte[v * width + e]);
  for (std::size_t i = 0; i < dwpe.size(); ++i) d_wpe.add(i, dwpe[i]);
}

}  // namespace trainplan::kernels
