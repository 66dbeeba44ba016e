#include <catch2/catch.hpp>

#include <cmath>

#include "fd_check.hpp"
#include "kernels/adamw.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/dropout.hpp"
#include "kernels/embedding.hpp"

using namespace trainplan;
using namespace trainplan::kernels;
using namespace trainplan::test;

TEST_CASE("cross-entropy gradient matches finite differences, and the loss of uniform logits is log V",
          "[kernels][loss]") {
  const std::size_t rows = 6, vocab = 11;
  std::vector<float> logits = random_vector(rows * vocab, 17, 3.0f), d(rows * vocab);
  std::vector<std::int32_t> targets = {0, 3, 10, 5, 5, 1};
  const view t{targets.data(), dtype::i32, rows};
  auto loss = [&](const std::vector<float>& x) {
    std::vector<float> xc = x, scratch(rows * vocab), token_losses(rows, 0.0f);
    cross_entropy_forward_backward(fp32_view(xc), t, fp32_view(scratch), fp32_view(token_losses), rows, vocab, vocab, 1.0f);
    double total = 0;
    for (float l : token_losses) total += l;
    return total;
  };
  std::vector<float> token_losses(rows, 0.0f);
  cross_entropy_forward_backward(fp32_view(logits), t, fp32_view(d), fp32_view(token_losses), rows, vocab, vocab, 1.0f);
  check_gradient("cross-entropy", logits, d, loss);
  std::vector<float> zeros(rows * vocab, 0.0f);
  CHECK(loss(zeros) == Approx(rows * std::log(11.0)));
  // grad_scale scales the gradient only
  std::vector<float> d2(rows * vocab), once = token_losses;
  cross_entropy_forward_backward(fp32_view(logits), t, fp32_view(d2), fp32_view(token_losses), rows, vocab, vocab, 0.5f);
  for (std::size_t i = 0; i < d.size(); ++i) CHECK(d2[i] == Approx(0.5f * d[i]));
  // Each call adds its row losses: a step's micro-batches sum on the device, read once.
  for (std::size_t r = 0; r < rows; ++r) CHECK(token_losses[r] == Approx(2.0f * once[r]));
  // In place (the fused classifier): the gradient written over the logits, the same values and losses.
  std::vector<float> in_place = logits, in_place_losses(rows, 0.0f);
  cross_entropy_forward_backward(fp32_view(in_place), t, fp32_view(in_place), fp32_view(in_place_losses), rows, vocab, vocab, 0.5f);
  CHECK(in_place == d2);
  for (std::size_t r = 0; r < rows; ++r) CHECK(in_place_losses[r] == once[r]);
}

TEST_CASE("padded logit columns are not classes and get zero gradient", "[kernels][loss]") {
  // llm.c's padded vocabulary: rows of 16 logits, 11 classes. Huge values in the padding would dominate the
  // softmax if it read them; the losses and the classes' gradient must be those of the unpadded rows.
  const std::size_t rows = 6, vocab = 11, padded = 16;
  std::vector<float> logits = random_vector(rows * vocab, 17, 3.0f);
  std::vector<std::int32_t> targets = {0, 3, 10, 5, 5, 1};
  const view t{targets.data(), dtype::i32, rows};
  std::vector<float> d(rows * vocab), losses(rows, 0.0f);
  cross_entropy_forward_backward(fp32_view(logits), t, fp32_view(d), fp32_view(losses), rows, vocab, vocab, 0.5f);
  std::vector<float> wide(rows * padded, 1e4f), wide_losses(rows, 0.0f);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t v = 0; v < vocab; ++v) wide[r * padded + v] = logits[r * vocab + v];
  // In place, as the harness runs it.
  cross_entropy_forward_backward(fp32_view(wide), t, fp32_view(wide), fp32_view(wide_losses), rows, vocab, padded, 0.5f);
  for (std::size_t r = 0; r < rows; ++r) {
    CHECK(wide_losses[r] == losses[r]);
    for (std::size_t v = 0; v < vocab; ++v) CHECK(wide[r * padded + v] == d[r * vocab + v]);
    for (std::size_t v = vocab; v < padded; ++v) CHECK(wide[r * padded + v] == 0.0f);
  }
  CHECK_THROWS_WITH(cross_entropy_forward_backward(fp32_view(wide), t, fp32_view(wide), fp32_view(wide_losses), rows, vocab,
                                                   vocab - 1, 1.0f),
                    Catch::Contains("cannot hold 11 classes"));
}

TEST_CASE("embedding backward matches finite differences", "[kernels][embedding]") {
  const std::size_t b = 2, s = 5, h = 4, vocab = 7;
  std::vector<std::int32_t> tokens = {1, 3, 3, 6, 0, 2, 2, 2, 5, 1};
  const view t{tokens.data(), dtype::i32, b * s};
  std::vector<float> wte = random_vector(vocab * h, 18), wpe = random_vector(s * h, 19), up = random_vector(b * s * h, 20);
  auto loss = [&](const std::vector<float>& te, const std::vector<float>& pe) {
    std::vector<float> a = te, p = pe, out(b * s * h);
    embedding_forward(t, fp32_view(a), fp32_view(p), fp32_view(out), b, s, h);
    return dot(out, up);
  };
  std::vector<float> dte(vocab * h, 0.0f), dpe(s * h, 0.0f), scratch((vocab + s) * h, 7.0f);  // stale contents
  embedding_backward(t, fp32_view(up), fp32_view(dte), fp32_view(dpe), fp32_view(scratch), b, s, h, vocab);
  check_gradient("d_wte", wte, dte, [&](const std::vector<float>& x) { return loss(x, wpe); });
  check_gradient("d_wpe", wpe, dpe, [&](const std::vector<float>& x) { return loss(wte, x); });
  for (std::size_t e = 0; e < h; ++e) CHECK(dte[4 * h + e] == 0.0f);  // token 4 never appears
  std::vector<float> short_scratch(vocab * h);  // no room for the positions' sums
  CHECK_THROWS(embedding_backward(t, fp32_view(up), fp32_view(dte), fp32_view(dpe), fp32_view(short_scratch), b, s, h, vocab));
}

TEST_CASE("ids outside the vocabulary are refused by the embedding and the cross-entropy", "[kernels][embedding][loss]") {
  const std::size_t b = 1, s = 3, h = 2, vocab = 4;
  std::vector<float> wte(vocab * h, 1.0f), out(b * s * h), up(b * s * h, 1.0f), dte(vocab * h), scratch(vocab * h);
  std::vector<float> logits(s * vocab, 0.0f), d(s * vocab), losses(s, 0.0f);
  for (std::int32_t bad : {static_cast<std::int32_t>(vocab), -1}) {
    std::vector<std::int32_t> ids = {0, bad, 3};
    const view t{ids.data(), dtype::i32, s};
    CHECK_THROWS_WITH(embedding_forward(t, fp32_view(wte), view{}, fp32_view(out), b, s, h),
                      Catch::Contains("token id " + std::to_string(bad) + " at position 1"));
    CHECK_THROWS_WITH(embedding_backward(t, fp32_view(up), fp32_view(dte), view{}, fp32_view(scratch), b, s, h, vocab),
                      Catch::Contains("outside the vocabulary of 4"));
    CHECK_THROWS_WITH(cross_entropy_forward_backward(fp32_view(logits), t, fp32_view(d), fp32_view(losses), s, vocab, vocab, 1.0f),
                      Catch::Contains("target id " + std::to_string(bad) + " at row 1"));
  }
}

TEST_CASE("a 16-bit embedding gradient is rounded once, after the fp32 sum", "[kernels][embedding]") {
  // 256 tokens all 0, each adding 2^-9 to a bf16 gradient that starts at 1: added one by one in bf16 the
  // gradient would never move (1 + 2^-9 rounds back to 1), summed in fp32 first it becomes 1.5.
  const std::size_t b = 1, s = 256, h = 1, vocab = 2;
  std::vector<std::int32_t> tokens(s, 0);
  std::vector<float> up(s, 0x1p-9f), scratch(vocab * h, 0.0f);
  std::vector<std::uint16_t> grad = {float_to_bf16(1.0f), float_to_bf16(0.0f)};
  const view d_wte{grad.data(), dtype::bf16, 2};
  embedding_backward({tokens.data(), dtype::i32, s}, fp32_view(up), d_wte, view{}, fp32_view(scratch), b, s, h, vocab);
  CHECK(d_wte.get(0) == 1.5f);
  CHECK(d_wte.get(1) == 0.0f);
}

TEST_CASE("AdamW's first step moves each weight by lr against its gradient's sign, after decay", "[kernels][adamw]") {
  // Step 1: m_hat = g, v_hat = g^2, so the update is lr * g / (|g| + eps) ~ lr * sign(g).
  std::vector<float> p = {1.0f, -2.0f, 0.5f}, g = {0.3f, -4.0f, 0.0f}, m(3, 0.0f), v(3, 0.0f);
  const adamw_config cfg;
  adamw_step(cfg, 1, fp32_view(p), fp32_view(g), 1.0f, fp32_view(m), fp32_view(v), view{}, 3);
  CHECK(p[0] == Approx(1.0f * (1 - cfg.lr * cfg.weight_decay) - cfg.lr).epsilon(1e-6));
  CHECK(p[1] == Approx(-2.0f * (1 - cfg.lr * cfg.weight_decay) + cfg.lr).epsilon(1e-6));
  CHECK(p[2] == Approx(0.5f * (1 - cfg.lr * cfg.weight_decay)).epsilon(1e-6));
  CHECK(m[1] == Approx(0.1f * -4.0f));
  CHECK(v[1] == Approx(0.001 * 16.0).epsilon(1e-4));  // 1 - 0.999f is 0.001 only to ~1.3e-5 in fp32
  std::vector<float> inf = {1.0f, std::numeric_limits<float>::infinity()};
  std::int32_t flag = 0;
  const view flag_view{&flag, dtype::i32, 1};
  CHECK(has_non_finite(fp32_view(inf), flag_view, 2));
  CHECK(flag == 1);
  CHECK_FALSE(has_non_finite(fp32_view(p), flag_view, 3));  // the flag is cleared first
  CHECK(flag == 0);
}

TEST_CASE("dropout masks keep 1 - p of elements and are reproducible", "[kernels][dropout]") {
  const std::size_t n = 200000;
  std::vector<std::uint8_t> a(n), b(n), c(n);
  dropout_mask(42, 7, 0.1f, {a.data(), dtype::u8, n}, n);
  dropout_mask(42, 7, 0.1f, {b.data(), dtype::u8, n}, n);
  dropout_mask(42, 8, 0.1f, {c.data(), dtype::u8, n}, n);
  std::size_t kept = 0, same_site = 0, other_site = 0;
  for (std::size_t i = 0; i < n; ++i) kept += a[i], same_site += a[i] == b[i], other_site += a[i] == c[i];
  // Binomial(n, 0.9): standard deviation sqrt(n * 0.09) ~ 134; allow 5 of them.
  CHECK(std::abs(static_cast<double>(kept) - 0.9 * n) < 5 * 134);
  CHECK(same_site == n);
  CHECK(other_site < n);  // another site draws other masks (two independent masks agree on ~82%)
}
