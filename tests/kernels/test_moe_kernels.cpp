// The Mixture-of-Experts kernels (kernels/moe_router, moe_permute, moe_combine) against finite differences,
// one by one and composed into a whole MoE MLP (router GEMM, softmax, top-k, permutation, each expert's
// SwiGLU, combine) as validate/transformer.cpp composes them.
#include <catch2/catch.hpp>

#include <cstdint>

#include "fd_check.hpp"
#include "kernels/activation.hpp"
#include "kernels/gemm.hpp"
#include "kernels/moe_combine.hpp"
#include "kernels/moe_permute.hpp"
#include "kernels/moe_router.hpp"

using namespace trainplan;
using namespace trainplan::kernels;
using namespace trainplan::test;

namespace {

kernels::view i64_view(std::vector<std::int64_t>& v) { return {v.data(), dtype::i64, v.size()}; }

// Routing is piecewise: a finite difference is only meaningful where no perturbation changes the top-k
// choice, so each check below asserts that the choice it perturbs around stays the same.
struct routed {
  std::vector<float> probs, weights;
  std::vector<std::int64_t> indices;
};
routed route(std::vector<float> logits, std::size_t T, std::size_t E, std::size_t k) {
  routed r{std::vector<float>(T * E), std::vector<float>(T * k), std::vector<std::int64_t>(T * k)};
  moe_router_forward(fp32_view(logits), fp32_view(r.probs), i64_view(r.indices), fp32_view(r.weights), T, E, k);
  return r;
}

}  // namespace

TEST_CASE("MoE router: softmax, top-k and renormalised weights, and their backward", "[kernels][moe]") {
  const std::size_t T = 5, E = 4, k = 2;
  // Logits at least 0.5 apart within a token (plus noise under 0.1): a 1e-2 step cannot change the choice.
  std::vector<float> logits = random_vector(T * E, 21, 0.05f);
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t e = 0; e < E; ++e) logits[t * E + e] += 0.6f * static_cast<float>((t * 3 + e * 5) % E);
  const routed r = route(logits, T, E, k);
  for (std::size_t t = 0; t < T; ++t) {
    double sum_p = 0;
    for (std::size_t e = 0; e < E; ++e) sum_p += r.probs[t * E + e];
    CHECK(sum_p == Approx(1.0).epsilon(1e-6));
    CHECK(r.weights[t * k] + r.weights[t * k + 1] == Approx(1.0f).epsilon(1e-6));
    CHECK(r.weights[t * k] >= r.weights[t * k + 1]);  // descending
    CHECK(r.probs[t * E + static_cast<std::size_t>(r.indices[t * k])] >= r.probs[t * E + static_cast<std::size_t>(r.indices[t * k + 1])]);
  }
  const std::vector<float> up = random_vector(T * k, 22);
  std::vector<float> d_weights = up, probs = r.probs, d_logits(T * E);
  std::vector<std::int64_t> indices = r.indices;
  moe_router_backward(fp32_view(probs), i64_view(indices), fp32_view(d_weights), fp32_view(d_logits), T, E, k);
  check_gradient("d_logits", logits, d_logits, [&](const std::vector<float>& z) {
    const routed rz = route(z, T, E, k);
    REQUIRE(rz.indices == r.indices);
    return dot(rz.weights, up);
  });
  // In place (d_logits over probs, as the harness runs it): the same numbers.
  moe_router_backward(fp32_view(probs), i64_view(indices), fp32_view(d_weights), fp32_view(probs), T, E, k);
  CHECK(probs == d_logits);
  // Ties go to the lower expert index.
  const routed tie = route(std::vector<float>(E, 0.0f), 1, E, k);
  CHECK(tie.indices == std::vector<std::int64_t>{0, 1});
}

TEST_CASE("MoE row map: dropless groups tokens by expert, a capacity drops later tokens and pads", "[kernels][moe]") {
  // 4 tokens, top-2 of 3 experts; expert 0 is chosen by every token.
  std::vector<std::int64_t> indices{0, 1, 2, 0, 0, 1, 0, 2};
  const view iv = i64_view(indices);
  const moe_row_map dropless = make_moe_row_map({4, 3, 2, 0}, iv);
  CHECK(dropless.expert_rows == std::vector<std::size_t>{4, 2, 2});
  CHECK(dropless.expert_first_row == std::vector<std::size_t>{0, 4, 6});
  CHECK(dropless.row_of_choice == std::vector<std::int64_t>{0, 4, 6, 1, 2, 5, 3, 7});
  const moe_row_map capped = make_moe_row_map({4, 3, 2, 3}, iv);  // capacity 3 rows per expert
  CHECK(capped.expert_rows == std::vector<std::size_t>{3, 3, 3});
  // Token 3's choice of expert 0 is the fourth: dropped. Experts 1 and 2 have a padding row each.
  CHECK(capped.row_of_choice == std::vector<std::int64_t>{0, 3, 6, 1, 2, 4, -1, 7});
}

TEST_CASE("MoE permutation and combine backward match finite differences, with drops and padding", "[kernels][moe]") {
  const std::size_t T = 6, E = 4, k = 2, width = 5;
  std::vector<std::int64_t> indices{0, 1, 0, 2, 0, 3, 1, 0, 2, 3, 0, 1};  // expert 0 six times
  for (std::size_t capacity : {std::size_t{0}, std::size_t{3}}) {
    INFO("capacity " << capacity);
    const moe_dispatch d{T, E, k, capacity};
    const std::size_t R = d.rows();
    const std::vector<float> x = random_vector(T * width, 31), w = random_vector(T * k, 32), out = random_vector(R * width, 33),
                             up_rows = random_vector(R * width, 34), up_y = random_vector(T * width, 35);
    // permutation: rows = P x, L = <rows, up_rows>
    std::vector<float> d_x(T * width, 0.0f), up_copy = up_rows;
    moe_permute_backward(d, i64_view(indices), fp32_view(up_copy), fp32_view(d_x), width);
    check_gradient("permute d_x", x, d_x, [&](const std::vector<float>& xx) {
      std::vector<float> xc = xx, rows(R * width, 7.0f);
      moe_permute_forward(d, i64_view(indices), fp32_view(xc), fp32_view(rows), width);
      return dot(rows, up_rows);
    });
    // combine: y = sum_j w_j out[row], L = <y, up_y>
    auto combine_loss = [&](const std::vector<float>& ww, const std::vector<float>& oo) {
      std::vector<float> wc = ww, oc = oo, y(T * width);
      moe_combine_forward(d, i64_view(indices), fp32_view(wc), fp32_view(oc), fp32_view(y), width);
      return dot(y, up_y);
    };
    std::vector<float> d_out(R * width, 9.0f), d_w(T * k), w_copy = w, out_copy = out, dy = up_y;
    moe_combine_backward(d, i64_view(indices), fp32_view(w_copy), fp32_view(out_copy), fp32_view(dy), fp32_view(d_out),
                         fp32_view(d_w), width);
    check_gradient("combine d_weights", w, d_w, [&](const std::vector<float>& v) { return combine_loss(v, out); });
    check_gradient("combine d_expert_out", out, d_out, [&](const std::vector<float>& v) { return combine_loss(w, v); });
    // d_weights written over the weights: the same numbers.
    moe_combine_backward(d, i64_view(indices), fp32_view(w_copy), fp32_view(out_copy), fp32_view(dy), fp32_view(d_out),
                         fp32_view(w_copy), width);
    CHECK(w_copy == d_w);
  }
}

namespace {

// A whole MoE MLP in fp32: y = combine(experts(permute(x)), top-k(softmax(x . Wr^T))), with its backward
// as validate/transformer.cpp runs it.
struct moe_mlp {
  std::size_t T, h, f, E, k, capacity;
  std::vector<float> router, gate, up, down;  // (E, h), (E, f, h), (E, f, h), (E, h, f)

  moe_dispatch dispatch() const { return {T, E, k, capacity}; }

  struct saved {
    std::vector<float> probs, weights, permuted, a, b, c, out, y;
    std::vector<std::int64_t> indices;
  };

  saved forward(std::vector<float> x) const {
    const moe_dispatch d = dispatch();
    const std::size_t R = d.rows();
    saved s{std::vector<float>(T * E), std::vector<float>(T * k), std::vector<float>(R * h), std::vector<float>(R * f),
            std::vector<float>(R * f), std::vector<float>(R * f), std::vector<float>(R * h), std::vector<float>(T * h),
            std::vector<std::int64_t>(T * k)};
    std::vector<float> wr = router, wg = gate, wu = up, wd = down;
    linear_forward(fp32_view(x), fp32_view(wr), nullptr, fp32_view(s.probs), T, E, h);
    moe_router_forward(fp32_view(s.probs), fp32_view(s.probs), i64_view(s.indices), fp32_view(s.weights), T, E, k);
    moe_permute_forward(d, i64_view(s.indices), fp32_view(x), fp32_view(s.permuted), h);
    const moe_row_map map = make_moe_row_map(d, i64_view(s.indices));
    for (std::size_t e = 0; e < E; ++e) {
      const std::size_t r0 = map.expert_first_row[e], n = map.expert_rows[e];
      const view in = fp32_view(s.permuted).slice(r0 * h, n * h);
      linear_forward(in, fp32_view(wg).slice(e * f * h, f * h), nullptr, fp32_view(s.a).slice(r0 * f, n * f), n, f, h);
      linear_forward(in, fp32_view(wu).slice(e * f * h, f * h), nullptr, fp32_view(s.b).slice(r0 * f, n * f), n, f, h);
    }
    swiglu_forward(fp32_view(s.a), fp32_view(s.b), fp32_view(s.c), R * f);
    for (std::size_t e = 0; e < E; ++e) {
      const std::size_t r0 = map.expert_first_row[e], n = map.expert_rows[e];
      linear_forward(fp32_view(s.c).slice(r0 * f, n * f), fp32_view(wd).slice(e * h * f, h * f), nullptr,
                     fp32_view(s.out).slice(r0 * h, n * h), n, h, f);
    }
    moe_combine_forward(d, i64_view(s.indices), fp32_view(s.weights), fp32_view(s.out), fp32_view(s.y), h);
    return s;
  }

  // Gradients of <y, dy> for x, the router and the gate weights.
  void backward(std::vector<float> x, saved s, std::vector<float> dy, std::vector<float>& d_x, std::vector<float>& d_router,
                std::vector<float>& d_gate_w, std::vector<float>& d_down_w) const {
    const moe_dispatch d = dispatch();
    const std::size_t R = d.rows();
    std::vector<float> wr = router, wg = gate, wu = up, wd = down, d_rows(R * h), d_g(R * f), d_u(R * f), d_up_w(up.size());
    d_x.assign(T * h, 0.0f), d_router.assign(router.size(), 0.0f), d_gate_w.assign(gate.size(), 0.0f), d_down_w.assign(down.size(), 0.0f);
    const view iv = i64_view(s.indices), probs = fp32_view(s.probs), weights = fp32_view(s.weights);
    moe_combine_backward(d, iv, weights, fp32_view(s.out), fp32_view(dy), fp32_view(d_rows), weights, h);
    moe_router_backward(probs, iv, weights, probs, T, E, k);
    linear_backward_weight(probs, fp32_view(x), fp32_view(d_router), nullptr, T, E, h);
    linear_backward_input(probs, fp32_view(wr), fp32_view(d_x), T, E, h, false);
    const moe_row_map map = make_moe_row_map(d, iv);
    for (std::size_t e = 0; e < E; ++e) {
      const std::size_t r0 = map.expert_first_row[e], n = map.expert_rows[e];
      const view g = fp32_view(d_rows).slice(r0 * h, n * h);
      linear_backward_weight(g, fp32_view(s.c).slice(r0 * f, n * f), fp32_view(d_down_w).slice(e * h * f, h * f), nullptr, n, h, f);
      linear_backward_input(g, fp32_view(wd).slice(e * h * f, h * f), fp32_view(d_g).slice(r0 * f, n * f), n, h, f, false);
    }
    swiglu_backward(fp32_view(s.a), fp32_view(s.b), fp32_view(d_g), fp32_view(d_g), fp32_view(d_u), R * f);
    for (std::size_t e = 0; e < E; ++e) {
      const std::size_t r0 = map.expert_first_row[e], n = map.expert_rows[e];
      const view in = fp32_view(s.permuted).slice(r0 * h, n * h), dg = fp32_view(d_g).slice(r0 * f, n * f),
                 du = fp32_view(d_u).slice(r0 * f, n * f), dx = fp32_view(d_rows).slice(r0 * h, n * h);
      linear_backward_weight(dg, in, fp32_view(d_gate_w).slice(e * f * h, f * h), nullptr, n, f, h);
      linear_backward_weight(du, in, fp32_view(d_up_w).slice(e * f * h, f * h), nullptr, n, f, h);
      linear_backward_input(dg, fp32_view(wg).slice(e * f * h, f * h), dx, n, f, h, false);
      linear_backward_input(du, fp32_view(wu).slice(e * f * h, f * h), dx, n, f, h, true);
    }
    moe_permute_backward(d, iv, fp32_view(d_rows), fp32_view(d_x), h);
  }
};

}  // namespace

TEST_CASE("a whole MoE MLP (router, top-2, experts, combine) backward matches finite differences", "[kernels][moe]") {
  const std::size_t T = 6, h = 8, f = 5, E = 4, k = 2;
  // Capacity 0 (dropless) and 2 rows per expert (12 choices for 8 rows: some dropped, maybe some padding).
  for (std::size_t capacity : {std::size_t{0}, std::size_t{2}}) {
    INFO("capacity " << capacity);
    moe_mlp mlp{T, h, f, E, k, capacity, random_vector(E * h, 41), random_vector(E * f * h, 42), random_vector(E * f * h, 43),
                random_vector(E * h * f, 44)};
    const std::vector<float> x = random_vector(T * h, 45), dy = random_vector(T * h, 46);
    const moe_mlp::saved ref = mlp.forward(x);
    std::vector<float> d_x, d_router, d_gate, d_down;
    mlp.backward(x, ref, dy, d_x, d_router, d_gate, d_down);
    // A step of 1e-3 (not fd_check's 1e-2) keeps every token's top-2 choice, which the loss asserts; fp32 noise
    // over 1e-3 is ~1e-4 relative, within the 2e-3 tolerance.
    auto loss = [&](const moe_mlp& m, const std::vector<float>& xx) {
      const moe_mlp::saved s = m.forward(xx);
      REQUIRE(s.indices == ref.indices);
      return dot(s.y, dy);
    };
    check_gradient("d_x", x, d_x, [&](const std::vector<float>& v) { return loss(mlp, v); }, 1e-3);
    check_gradient("d_router", mlp.router, d_router, [&](const std::vector<float>& v) {
      moe_mlp m = mlp;
      m.router = v;
      return loss(m, x);
    }, 1e-3);
    check_gradient("d_gate", mlp.gate, d_gate, [&](const std::vector<float>& v) {
      moe_mlp m = mlp;
      m.gate = v;
      return loss(m, x);
    }, 1e-3);
    check_gradient("d_down", mlp.down, d_down, [&](const std::vector<float>& v) {
      moe_mlp m = mlp;
      m.down = v;
      return loss(m, x);
    }, 1e-3);
  }
}
