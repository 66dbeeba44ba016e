#include <catch2/catch.hpp>
#include <cmath>

#include "fd_check.hpp"
#include "kernels/attention.hpp"

using namespace trainplan;
using namespace trainplan::kernels;
using namespace trainplan::test;

namespace {

struct attention_case {
  attention_shape sh;
  attention_dropout drop;
};

std::vector<float> run_eager(const attention_case& c, std::vector<float> qkv) {
  const std::size_t probs = c.sh.batch * c.sh.heads * c.sh.seq * c.sh.seq;
  std::vector<float> sm(probs), dropped(probs), out(c.sh.batch * c.sh.seq * c.sh.out_width());
  std::vector<std::uint8_t> mask(probs);
  eager_attention_forward(c.sh, fp32_view(qkv), fp32_view(sm), {mask.data(), dtype::u8, probs}, fp32_view(dropped), c.drop,
                          fp32_view(out));
  return out;
}

std::vector<float> run_flash(const attention_case& c, std::vector<float> qkv, std::vector<float>* lse_out = nullptr) {
  std::vector<float> out(c.sh.batch * c.sh.seq * c.sh.out_width()), lse(c.sh.batch * c.sh.heads * c.sh.seq);
  flash_attention_forward(c.sh, fp32_view(qkv), c.drop, fp32_view(out), fp32_view(lse));
  if (lse_out) *lse_out = lse;
  return out;
}

}  // namespace

TEST_CASE("eager and flash attention agree, forward and backward, with GQA and dropout", "[kernels][attention]") {
  // seq 37 spans three flash key tiles of 16, the last one partial.
  for (attention_case c : {attention_case{{2, 37, 4, 2, 8}, {0.0f, 1, 2}}, attention_case{{1, 20, 2, 1, 4}, {0.25f, 3, 4}},
                           attention_case{{1, 9, 3, 3, 6}, {0.0f, 5, 6}}}) {
    INFO("seq " << c.sh.seq << " heads " << c.sh.heads << " kv " << c.sh.kv_heads << " p " << c.drop.p);
    const std::vector<float> qkv = random_vector(c.sh.batch * c.sh.seq * c.sh.qkv_width(), 12, 1.5f);
    const std::vector<float> up = random_vector(c.sh.batch * c.sh.seq * c.sh.out_width(), 13);
    const std::vector<float> eager_out = run_eager(c, qkv);
    std::vector<float> lse;
    const std::vector<float> flash_out = run_flash(c, qkv, &lse);
    for (std::size_t i = 0; i < eager_out.size(); ++i) REQUIRE(flash_out[i] == Approx(eager_out[i]).margin(1e-5));

    const std::size_t probs = c.sh.batch * c.sh.heads * c.sh.seq * c.sh.seq;
    std::vector<float> sm(probs), dropped(probs), out(eager_out.size()), scores(probs), d_eager(qkv.size());
    std::vector<std::uint8_t> mask(probs);
    std::vector<float> qkv_copy = qkv, up_copy = up;
    const view mask_view{mask.data(), dtype::u8, probs};
    eager_attention_forward(c.sh, fp32_view(qkv_copy), fp32_view(sm), mask_view, fp32_view(dropped), c.drop, fp32_view(out));
    eager_attention_backward(c.sh, fp32_view(qkv_copy), fp32_view(sm), mask_view, fp32_view(dropped), c.drop,
                             fp32_view(up_copy), fp32_view(scores), fp32_view(d_eager));
    check_gradient("eager attention", qkv, d_eager, [&](const std::vector<float>& x) { return dot(run_eager(c, x), up); });

    std::vector<float> flash_copy = flash_out, delta(c.sh.batch * c.sh.heads * c.sh.seq), d_flash(qkv.size());
    flash_attention_backward(c.sh, fp32_view(qkv_copy), fp32_view(flash_copy), fp32_view(lse), c.drop, fp32_view(up_copy),
                             fp32_view(delta), fp32_view(d_flash));
    for (std::size_t i = 0; i < d_eager.size(); ++i) REQUIRE(d_flash[i] == Approx(d_eager[i]).margin(1e-5));
  }
}

TEST_CASE("causality: an output never depends on later tokens", "[kernels][attention]") {
  attention_case c{{1, 12, 2, 2, 4}, {0.0f, 0, 0}};
  std::vector<float> qkv = random_vector(12 * c.sh.qkv_width(), 14);
  const std::vector<float> before = run_flash(c, qkv);
  for (std::size_t e = 0; e < c.sh.qkv_width(); ++e) qkv[11 * c.sh.qkv_width() + e] += 5.0f;  // change the last token
  const std::vector<float> after = run_flash(c, qkv);
  for (std::size_t i = 0; i < 11 * c.sh.out_width(); ++i) CHECK(after[i] == before[i]);
}

TEST_CASE("RoPE's inverse is its transpose and keeps norms", "[kernels][attention]") {
  attention_shape sh{2, 6, 2, 1, 8};
  std::vector<float> x = random_vector(2 * 6 * sh.qkv_width(), 15), y = random_vector(x.size(), 16);
  std::vector<float> rx = x, rty = y;
  rope_apply(sh, fp32_view(rx), false);
  rope_apply(sh, fp32_view(rty), true);
  CHECK(dot(rx, y) == Approx(dot(x, rty)).epsilon(1e-5));  // <R x, y> = <x, R^T y>
  CHECK(dot(rx, rx) == Approx(dot(x, x)).epsilon(1e-5));
  rope_apply(sh, fp32_view(rx), true);
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(rx[i] == Approx(x[i]).margin(1e-5));
}

TEST_CASE("eager attention stores its scores in the probabilities' dtype before the softmax", "[kernels][attention]") {
  // PyTorch's eager attention under autocast: q k^T comes out of the matmul in bf16, softmax upcasts it.
  // One query attends to two keys, head_dim 1 (scale 1): scores 0 and 4 x 2.51 = 10.04, which bf16 stores
  // as 10.0625 (its spacing is 1/16 between 8 and 16). The first key's probability 1 / (1 + e^score) then
  // differs by about 2%, five bf16 ulps: the stored probability tells which score the softmax read.
  const attention_shape sh{1, 2, 1, 1, 1};
  std::vector<float> qkv = {0.0f, 0.0f, 1.0f,    // token 0: q, k, v
                            4.0f, 2.51f, 0.0f};  // token 1
  std::vector<std::uint16_t> sm(4), dropped(4), out(2);
  std::vector<std::uint8_t> mask(4);
  eager_attention_forward(sh, fp32_view(qkv), {sm.data(), dtype::bf16, 4}, {mask.data(), dtype::u8, 4},
                          {dropped.data(), dtype::bf16, 4}, {}, {out.data(), dtype::bf16, 2});
  const view probs{sm.data(), dtype::bf16, 4};
  const float score = 4.0f * 2.51f, stored = round_to(dtype::bf16, score);
  REQUIRE(stored == 10.0625f);
  const float read_stored = round_to(dtype::bf16, 1.0f / (1.0f + std::exp(stored)));
  const float read_unrounded = round_to(dtype::bf16, 1.0f / (1.0f + std::exp(score)));
  REQUIRE(read_stored != read_unrounded);  // the case tells the two apart
  CHECK(probs.get(2) == read_stored);      // row 1, key 0
  CHECK(probs.get(3) == round_to(dtype::bf16, 1.0f / (1.0f + std::exp(-stored))));
}
