// The CPU reference of flash-style attention (attention.hpp): keys in tiles with an online softmax
// (Dao et al. 2022), and the backward that recomputes the probabilities from the log-sum-exp (FlashAttention-2).
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/dropout.hpp"

namespace trainplan::kernels {
namespace {

constexpr std::size_t key_tile = 16;  // keys per tile; a GPU kernel sizes this to its shared memory

std::size_t qkv_index(const attention_shape& sh, std::size_t b, std::size_t t, std::size_t head_slot, std::size_t e) {
  return (b * sh.seq + t) * sh.qkv_width() + head_slot * sh.head_dim + e;
}
std::size_t out_index(const attention_shape& sh, std::size_t b, std::size_t t, std::size_t h, std::size_t e) {
  return (b * sh.seq + t) * sh.out_width() + h * sh.head_dim + e;
}

}  // namespace

void flash_attention_forward(const attention_shape& sh, const view& qkv, const attention_dropout& drop, const view& out,
                             const view& lse) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(sh.head_dim));
  const std::size_t group = sh.heads / sh.kv_heads, s = sh.seq, d = sh.head_dim;
  const float keep_scale = 1.0f / (1.0f - drop.p);
  std::vector<float> q(d), acc(d), tile(key_tile);
  for (std::size_t b = 0; b < sh.batch; ++b)
    for (std::size_t h = 0; h < sh.heads; ++h) {
      const std::size_t k_slot = sh.heads + h / group, v_slot = sh.heads + sh.kv_heads + h / group;
      for (std::size_t i = 0; i < s; ++i) {
        for (std::size_t e = 0; e < d; ++e) q[e] = qkv.get(qkv_index(sh, b, i, h, e));
        float running_max = -std::numeric_limits<float>::infinity();
        double running_sum = 0;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (std::size_t j0 = 0; j0 <= i; j0 += key_tile) {
          const std::size_t j1 = std::min(i + 1, j0 + key_tile);
          float tile_max = running_max;
          for (std::size_t j = j0; j < j1; ++j) {
            float dot = 0;
            for (std::size_t e = 0; e < d; ++e) dot += q[e] * qkv.get(qkv_index(sh, b, j, k_slot, e));
            tile[j - j0] = dot * scale;
            tile_max = std::max(tile_max, tile[j - j0]);
          }
          // Online softmax (Milakov & Gimelshein 2018): rescale what was summed under the old maximum.
          const float correction = std::exp(running_max - tile_max);
          running_sum *= correction;
          for (float& a : acc) a *= correction;
          for (std::size_t j = j0; j < j1; ++j) {
            const float p = std::exp(tile[j - j0] - tile_max);
            running_sum += p;
            const std::size_t flat = ((b * sh.heads + h) * s + i) * s + j;
            if (!dropout_keep(drop.seed, drop.site, flat, drop.p)) continue;
            const float pd = drop.p > 0 ? p * keep_scale : p;
            for (std::size_t e = 0; e < d; ++e) acc[e] += pd * qkv.get(qkv_index(sh, b, j, v_slot, e));
          }
          running_max = tile_max;
        }
        for (std::size_t e = 0; e < d; ++e) out.set(out_index(sh, b, i, h, e), acc[e] / static_cast<float>(running_sum));
        lse.set((b * sh.heads + h) * s + i, running_max + static_cast<float>(std::log(running_sum)));
      }
    }
}

void flash_attention_backward(const attention_shape& sh, const view& qkv, const view& out, const view& lse,
                              const attention_dropout& drop, const view& d_out, const view& delta, const view& d_qkv) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(sh.head_dim));
  const std::size_t group = sh.heads / sh.kv_heads, s = sh.seq, d = sh.head_dim;
  const float keep_scale = 1.0f / (1.0f - drop.p);
  // delta_i = rowsum(d_out_i * out_i) = sum_j P_ij dP_ij, which the softmax backward needs.
  for (std::size_t b = 0; b < sh.batch; ++b)
    for (std::size_t h = 0; h < sh.heads; ++h)
      for (std::size_t i = 0; i < s; ++i) {
        float dot = 0;
        for (std::size_t e = 0; e < d; ++e) dot += d_out.get(out_index(sh, b, i, h, e)) * out.get(out_index(sh, b, i, h, e));
        delta.set((b * sh.heads + h) * s + i, dot);
      }
  // dK and dV of one key/value head gather contributions from every query head of its group: they are
  // summed in fp32 here and stored once, as a GPU kernel keeps them on chip.
  std::vector<float> dq(d), dk(s * d), dv(s * d);
  for (std::size_t b = 0; b < sh.batch; ++b)
    for (std::size_t kvh = 0; kvh < sh.kv_heads; ++kvh) {
      const std::size_t k_slot = sh.heads + kvh, v_slot = sh.heads + sh.kv_heads + kvh;
      std::fill(dk.begin(), dk.end(), 0.0f);
      std::fill(dv.begin(), dv.end(), 0.0f);
      for (std::size_t h = kvh * group; h < (kvh + 1) * group; ++h)
        for (std::size_t i = 0; i < s; ++i) {
          const std::size_t row = (b * sh.heads + h) * s + i;
          const float row_lse = lse.get(row), row_delta = delta.get(row);
          std::fill(dq.begin(), dq.end(), 0.0f);
          for (std::size_t j = 0; j <= i; ++j) {
            float dot = 0, dpd = 0;
            for (std::size_t e = 0; e < d; ++e) {
              dot += qkv.get(qkv_index(sh, b, i, h, e)) * qkv.get(qkv_index(sh, b, j, k_slot, e));
              dpd += d_out.get(out_index(sh, b, i, h, e)) * qkv.get(qkv_index(sh, b, j, v_slot, e));
            }
            const float p = std::exp(dot * scale - row_lse);  // recomputed probability
            const bool keep = dropout_keep(drop.seed, drop.site, row * s + j, drop.p);
            const float pd = keep ? (drop.p > 0 ? p * keep_scale : p) : 0.0f;
            const float dp = keep ? (drop.p > 0 ? dpd * keep_scale : dpd) : 0.0f;
            const float ds = p * (dp - row_delta) * scale;
            for (std::size_t e = 0; e < d; ++e) {
              dv[j * d + e] += pd * d_out.get(out_index(sh, b, i, h, e));
              dq[e] += ds * qkv.get(qkv_index(sh, b, j, k_slot, e));
              dk[j * d + e] += ds * qkv.get(qkv_index(sh, b, i, h, e));
            }
          }
          for (std::size_t e = 0; e < d; ++e) d_qkv.set(qkv_index(sh, b, i, h, e), dq[e]);
        }
      for (std::size_t j = 0; j < s; ++j)
        for (std::size_t e = 0; e < d; ++e) {
          d_qkv.set(qkv_index(sh, b, j, k_slot, e), dk[j * d + e]);
          d_qkv.set(qkv_index(sh, b, j, v_slot, e), dv[j * d + e]);
        }
    }
}

}  // namespace trainplan::kernels
