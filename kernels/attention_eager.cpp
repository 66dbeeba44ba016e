// The CPU reference of eager attention (attention.hpp): scores, the causal softmax and its dropout
// materialised as (b, a, s, s) buffers, their backward; and the rotary embedding applied in place on q and k.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/dropout.hpp"

namespace trainplan::kernels {
namespace {

struct layout {
  const attention_shape& sh;
  std::size_t q(std::size_t b, std::size_t t, std::size_t h, std::size_t e) const {
    return (b * sh.seq + t) * sh.qkv_width() + h * sh.head_dim + e;
  }
  std::size_t k(std::size_t b, std::size_t t, std::size_t kvh, std::size_t e) const {
    return (b * sh.seq + t) * sh.qkv_width() + (sh.heads + kvh) * sh.head_dim + e;
  }
  std::size_t v(std::size_t b, std::size_t t, std::size_t kvh, std::size_t e) const {
    return (b * sh.seq + t) * sh.qkv_width() + (sh.heads + sh.kv_heads + kvh) * sh.head_dim + e;
  }
  std::size_t o(std::size_t b, std::size_t t, std::size_t h, std::size_t e) const {
    return (b * sh.seq + t) * sh.out_width() + h * sh.head_dim + e;
  }
  std::size_t p(std::size_t b, std::size_t h, std::size_t i, std::size_t j) const {
    return ((b * sh.heads + h) * sh.seq + i) * sh.seq + j;
  }
};

}  // namespace

void eager_attention_forward(const attention_shape& sh, const view& qkv, const view& softmax, const view& mask,
                             const view& dropped, const attention_dropout& drop, const view& out) {
  const layout at{sh};
  const float scale = 1.0f / std::sqrt(static_cast<float>(sh.head_dim));
  const std::size_t group = sh.heads / sh.kv_heads, s = sh.seq, d = sh.head_dim;
  const float keep_scale = 1.0f / (1.0f - drop.p);
  std::vector<float> scores(s);
  for (std::size_t b = 0; b < sh.batch; ++b)
    for (std::size_t h = 0; h < sh.heads; ++h) {
      const std::size_t kvh = h / group;
      for (std::size_t i = 0; i < s; ++i) {
        float max_score = -std::numeric_limits<float>::infinity();
        for (std::size_t j = 0; j <= i; ++j) {
          float dot = 0;
          for (std::size_t e = 0; e < d; ++e) dot += qkv.get(at.q(b, i, h, e)) * qkv.get(at.k(b, j, kvh, e));
          // The scores are stored in the probabilities' dtype before the softmax reads them back in fp32, as
          // PyTorch's eager attention does (transformers' eager_attention_forward: the matmul returns the
          // compute dtype, softmax(dtype=float32) upcasts it), and as the cuBLAS path writes them.
          scores[j] = round_to(softmax.type, dot * scale);
          max_score = std::max(max_score, scores[j]);
        }
        double sum = 0;
        for (std::size_t j = 0; j <= i; ++j) sum += std::exp(scores[j] - max_score);
        for (std::size_t j = 0; j < s; ++j) {
          const float prob = j <= i ? static_cast<float>(std::exp(scores[j] - max_score) / sum) : 0.0f;
          softmax.set(at.p(b, h, i, j), prob);
          if (drop.p > 0) {
            const bool keep = dropout_keep(drop.seed, drop.site, at.p(b, h, i, j), drop.p);
            mask.set(at.p(b, h, i, j), keep ? 1.0f : 0.0f);
            dropped.set(at.p(b, h, i, j), keep ? softmax.get(at.p(b, h, i, j)) * keep_scale : 0.0f);
          }
        }
        const view& probs = drop.p > 0 ? dropped : softmax;
        for (std::size_t e = 0; e < d; ++e) {
          float acc = 0;
          for (std::size_t j = 0; j <= i; ++j) acc += probs.get(at.p(b, h, i, j)) * qkv.get(at.v(b, j, kvh, e));
          out.set(at.o(b, i, h, e), acc);
        }
      }
    }
}

void eager_attention_backward(const attention_shape& sh, const view& qkv, const view& softmax, const view& mask,
                              const view& dropped, const attention_dropout& drop, const view& d_out,
                              const view& d_scores, const view& d_qkv) {
  const layout at{sh};
  const float scale = 1.0f / std::sqrt(static_cast<float>(sh.head_dim));
  const std::size_t group = sh.heads / sh.kv_heads, s = sh.seq, d = sh.head_dim;
  const float keep_scale = 1.0f / (1.0f - drop.p);
  const view& probs = drop.p > 0 ? dropped : softmax;
  std::vector<float> dq(d), dk(s * d), dv(s * d);
  for (std::size_t i = 0; i < d_qkv.size; ++i) d_qkv.set(i, 0.0f);
  for (std::size_t b = 0; b < sh.batch; ++b)
    for (std::size_t h = 0; h < sh.heads; ++h) {
      const std::size_t kvh = h / group;
      std::fill(dk.begin(), dk.end(), 0.0f);
      std::fill(dv.begin(), dv.end(), 0.0f);
      for (std::size_t i = 0; i < s; ++i) {
        // d(probs)_ij = d_out_i . v_j ; dv_j += probs_ij * d_out_i
        for (std::size_t j = 0; j <= i; ++j) {
          float dp = 0;
          const float pij = probs.get(at.p(b, h, i, j));
          for (std::size_t e = 0; e < d; ++e) {
            const float g = d_out.get(at.o(b, i, h, e));
            dp += g * qkv.get(at.v(b, j, kvh, e));
            dv[j * d + e] += pij * g;
          }
          if (drop.p > 0) dp = mask.get(at.p(b, h, i, j)) != 0.0f ? dp * keep_scale : 0.0f;
          d_scores.set(at.p(b, h, i, j), dp);
        }
        // softmax backward: dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik), in place in d_scores
        double dot = 0;
        for (std::size_t j = 0; j <= i; ++j) dot += softmax.get(at.p(b, h, i, j)) * d_scores.get(at.p(b, h, i, j));
        std::fill(dq.begin(), dq.end(), 0.0f);
        for (std::size_t j = 0; j <= i; ++j) {
          const float ds = softmax.get(at.p(b, h, i, j)) * static_cast<float>(d_scores.get(at.p(b, h, i, j)) - dot);
          d_scores.set(at.p(b, h, i, j), ds);
          const float dsv = d_scores.get(at.p(b, h, i, j)) * scale;
          for (std::size_t e = 0; e < d; ++e) {
            dq[e] += dsv * qkv.get(at.k(b, j, kvh, e));
            dk[j * d + e] += dsv * qkv.get(at.q(b, i, h, e));
          }
        }
        for (std::size_t e = 0; e < d; ++e) d_qkv.add(at.q(b, i, h, e), dq[e]);
      }
      for (std::size_t j = 0; j < s; ++j)
        for (std::size_t e = 0; e < d; ++e) {
          d_qkv.add(at.k(b, j, kvh, e), dk[j * d + e]);
          d_qkv.add(at.v(b, j, kvh, e), dv[j * d + e]);
        }
    }
}

void rope_apply(const attention_shape& sh, const view& qkv, bool inverse) {
  const std::size_t d = sh.head_dim, half = d / 2;
  const std::size_t rotated_heads = sh.heads + sh.kv_heads;  // q heads, then k heads
  for (std::size_t b = 0; b < sh.batch; ++b)
    for (std::size_t t = 0; t < sh.seq; ++t)
      for (std::size_t h = 0; h < rotated_heads; ++h) {
        const std::size_t base = (b * sh.seq + t) * sh.qkv_width() + h * d;
        for (std::size_t e = 0; e < half; ++e) {
          const double inv_freq = std::pow(10000.0, -2.0 * static_cast<double>(e) / static_cast<double>(d));
          const double angle = static_cast<double>(t) * inv_freq;
          const float c = static_cast<float>(std::cos(angle));
          const float sn = static_cast<float>(inverse ? -std::sin(angle) : std::sin(angle));
          const float x1 = qkv.get(base + e), x2 = qkv.get(base + e + half);
          qkv.set(base + e, x1 * c - x2 * sn);
          qkv.set(base + e + half, x2 * c + x1 * sn);
        }
      }
}

}  // namespace trainplan::kernels
