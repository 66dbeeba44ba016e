#include <catch2/catch.hpp>

#include "fd_check.hpp"
#include "kernels/activation.hpp"
#include "kernels/gemm.hpp"
#include "kernels/norm.hpp"

using namespace trainplan;
using namespace trainplan::kernels;
using namespace trainplan::test;

TEST_CASE("linear layer backward matches finite differences", "[kernels][gemm]") {
  const std::size_t M = 5, N = 7, K = 6;
  std::vector<float> in = random_vector(M * K, 1), w = random_vector(N * K, 2), b = random_vector(N, 3),
                     up = random_vector(M * N, 4);
  auto loss = [&](const std::vector<float>& i, const std::vector<float>& ww, const std::vector<float>& bb) {
    std::vector<float> ic = i, wc = ww, bc = bb, out(M * N);
    const view bv = fp32_view(bc);
    linear_forward(fp32_view(ic), fp32_view(wc), &bv, fp32_view(out), M, N, K);
    return dot(out, up);
  };
  std::vector<float> d_in(M * K, 0.0f), d_w(N * K, 0.0f), d_b(N, 0.0f);
  const view dbv = fp32_view(d_b);
  linear_backward_input(fp32_view(up), fp32_view(w), fp32_view(d_in), M, N, K, false);
  linear_backward_weight(fp32_view(up), fp32_view(in), fp32_view(d_w), &dbv, M, N, K);
  check_gradient("d_in", in, d_in, [&](const std::vector<float>& x) { return loss(x, w, b); });
  check_gradient("d_weight", w, d_w, [&](const std::vector<float>& x) { return loss(in, x, b); });
  check_gradient("d_bias", b, d_b, [&](const std::vector<float>& x) { return loss(in, w, x); });
  // accumulate adds to what is there
  std::vector<float> acc(M * K, 1.0f);
  linear_backward_input(fp32_view(up), fp32_view(w), fp32_view(acc), M, N, K, true);
  for (std::size_t i = 0; i < acc.size(); ++i) CHECK(acc[i] == Approx(d_in[i] + 1.0f));
}

TEST_CASE("layer norm and RMS norm backward match finite differences", "[kernels][norm]") {
  const std::size_t rows = 4, width = 9;
  std::vector<float> x = random_vector(rows * width, 5), w = random_vector(width, 6), b = random_vector(width, 7),
                     up = random_vector(rows * width, 8);
  auto ln_loss = [&](const std::vector<float>& xx, const std::vector<float>& ww, const std::vector<float>& bb) {
    std::vector<float> xc = xx, wc = ww, bc = bb, y(rows * width);
    layer_norm_forward(fp32_view(xc), fp32_view(wc), fp32_view(bc), fp32_view(y), rows, width);
    return dot(y, up);
  };
  std::vector<float> dx(rows * width, 0.0f), dw(width, 0.0f), db(width, 0.0f);
  std::vector<float> partials(3 * 2 * width, 99.0f);  // three partial rows; whatever they held is overwritten
  layer_norm_backward(fp32_view(x), fp32_view(w), fp32_view(up), fp32_view(dx), fp32_view(dw), fp32_view(db),
                      fp32_view(partials), rows, width);
  check_gradient("layer norm dx", x, dx, [&](const std::vector<float>& v) { return ln_loss(v, w, b); });
  check_gradient("layer norm dw", w, dw, [&](const std::vector<float>& v) { return ln_loss(x, v, b); });
  check_gradient("layer norm db", b, db, [&](const std::vector<float>& v) { return ln_loss(x, w, v); });

  auto rms_loss = [&](const std::vector<float>& xx, const std::vector<float>& ww) {
    std::vector<float> xc = xx, wc = ww, y(rows * width);
    rms_norm_forward(fp32_view(xc), fp32_view(wc), fp32_view(y), rows, width);
    return dot(y, up);
  };
  std::vector<float> rdx(rows * width, 0.0f), rdw(width, 0.0f), rms_partials(width, 99.0f);
  rms_norm_backward(fp32_view(x), fp32_view(w), fp32_view(up), fp32_view(rdx), fp32_view(rdw), fp32_view(rms_partials),
                    rows, width);
  check_gradient("rms norm dx", x, rdx, [&](const std::vector<float>& v) { return rms_loss(v, w); });
  check_gradient("rms norm dw", w, rdw, [&](const std::vector<float>& v) { return rms_loss(x, v); });
  std::vector<float> too_small(width);  // layer norm needs 2 * width sums per partial row
  CHECK_THROWS(layer_norm_backward(fp32_view(x), fp32_view(w), fp32_view(up), fp32_view(dx), fp32_view(dw), fp32_view(db),
                                   fp32_view(too_small), rows, width));
}

TEST_CASE("GELU and SwiGLU backward match finite differences", "[kernels][activation]") {
  const std::size_t n = 50;
  std::vector<float> x = random_vector(n, 9, 3.0f), u = random_vector(n, 10, 2.0f), up = random_vector(n, 11);
  std::vector<float> dx(n);
  gelu_backward(fp32_view(x), fp32_view(up), fp32_view(dx), n);
  check_gradient("gelu", x, dx, [&](const std::vector<float>& v) {
    std::vector<float> vc = v, y(n);
    gelu_forward(fp32_view(vc), fp32_view(y), n);
    return dot(y, up);
  });
  std::vector<float> dg(n), du(n);
  swiglu_backward(fp32_view(x), fp32_view(u), fp32_view(up), fp32_view(dg), fp32_view(du), n);
  auto sw = [&](const std::vector<float>& g, const std::vector<float>& uu) {
    std::vector<float> gc = g, uc = uu, y(n);
    swiglu_forward(fp32_view(gc), fp32_view(uc), fp32_view(y), n);
    return dot(y, up);
  };
  check_gradient("swiglu d_gate", x, dg, [&](const std::vector<float>& v) { return sw(v, u); });
  check_gradient("swiglu d_up", u, du, [&](const std::vector<float>& v) { return sw(x, v); });
  CHECK(gelu(0.0f) == 0.0f);
  CHECK(gelu(3.0f) == Approx(2.9964).epsilon(1e-4));  // tanh-approximate GELU at 3
}
