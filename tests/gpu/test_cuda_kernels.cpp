// Every CUDA kernel against its CPU reference (kernels/*.cpp) on the same inputs. Runs only where a CUDA
// device is usable; elsewhere it prints SKIPPED with the reason and exits 77, which ctest reports as a
// skipped test. Tolerances: fp32 runs differ from the CPU only in summation order and in the device's
// expf/tanhf (a few ulps), so 1e-4 of the largest magnitude; bf16 stores round either way by at most one
// bf16 ulp (2^-8 relative), so 1.6e-2 of the largest magnitude.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <memory>
#include <vector>

#include "kernels/activation.hpp"
#include "kernels/adamw.hpp"
#include "kernels/attention.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/cuda/ops.hpp"
#include "kernels/dropout.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gemm.hpp"
#include "kernels/norm.hpp"

using namespace trainplan;
namespace cpu = trainplan::kernels;
namespace gpu = trainplan::kernels::cuda;

namespace {

// The same values on the host and on the device, in one dtype.
class twin {
 public:
  twin(const std::vector<float>& values, dtype t) : type_(t), n_(values.size()), host_(n_ * dtype_bytes(t)) {
    const cpu::view h = host();
    for (std::size_t i = 0; i < n_; ++i) h.set(i, values[i]);
    device_ = gpu::device_alloc(host_.size());
    gpu::copy_to_device(device_, host_.data(), host_.size());
  }
  twin(const std::vector<std::int32_t>& values) : type_(dtype::i32), n_(values.size()), host_(n_ * 4) {
    std::memcpy(host_.data(), values.data(), host_.size());
    device_ = gpu::device_alloc(host_.size());
    gpu::copy_to_device(device_, host_.data(), host_.size());
  }
  ~twin() { gpu::device_free(device_); }
  twin(const twin&) = delete;
  twin& operator=(const twin&) = delete;

  cpu::view host() { return {host_.data(), type_, n_}; }
  cpu::view dev() { return {device_, type_, n_}; }
  // Device contents, as floats.
  std::vector<float> fetch() {
    std::vector<unsigned char> raw(host_.size());
    gpu::copy_to_host(raw.data(), device_, raw.size());
    const cpu::view v{raw.data(), type_, n_};
    std::vector<float> out(n_);
    for (std::size_t i = 0; i < n_; ++i) out[i] = v.get(i);
    return out;
  }
  std::vector<float> host_values() {
    std::vector<float> out(n_);
    for (std::size_t i = 0; i < n_; ++i) out[i] = host().get(i);
    return out;
  }

 private:
  dtype type_;
  std::size_t n_;
  std::vector<unsigned char> host_;
  void* device_ = nullptr;
};

std::vector<float> random(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(2.0 * cpu::uniform_hash(seed, 5, i) - 1.0);
  return v;
}

void check_close(const char* what, twin& t, dtype type) {
  INFO(what);
  const std::vector<float> reference = t.host_values(), got = t.fetch();
  double scale = 1e-6;
  for (float r : reference) scale = std::max(scale, static_cast<double>(std::abs(r)));
  const double tolerance = (type == dtype::fp32 ? 1e-4 : 1.6e-2) * scale;
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(got[i]) - reference[i]));
  CHECK(worst <= tolerance);
}

// For the tiled tensor-core kernels, per element: |got - ref| <= eps * max|ref| + 2 eps |ref|, with eps the
// largest relative error of one round-to-nearest store into the 16-bit type: half an ulp, and an ulp is at
// most 2^-7 of the value for bf16 (2^-10 for fp16), so eps = 2^-8 (2^-11).
//  - 2 eps |ref|: both sides round the result to the 16-bit type, from fp32 values that differ only in
//    summation order and a few fp32 ulps of expf, so the two stores can land one ulp apart.
//  - eps * max|ref|: the tensor-core path rounds P (and dS in the backward) to the 16-bit type before the
//    products P V, P~^T dO, dS^T Q and dS K, which the CPU reference keeps in fp32, so each term of those
//    sums is off by at most eps of itself. A row with one term (the first query attends only to itself)
//    carries that error whole, at most eps * |ref| <= eps * max|ref|; over many terms the independent
//    rounding errors have both signs and partly cancel (they grow like the square root of the count,
//    while the terms of a row of P sum to at most 1 / (1 - p)), staying within the same budget.
// Where an element of a [b, s, width] attention tensor sits, for a failure message: token, part (q, k, v or the
// output), head and dim, so that a kernel bug shows its pattern (one tile, one part, one dim range).
struct attention_layout {
  cpu::attention_shape sh;
  bool qkv = false;  // false: the [b, s, heads * head_dim] output
  std::size_t width() const { return qkv ? sh.qkv_width() : sh.out_width(); }
  std::string part(std::size_t i) const {
    const std::size_t col = i % width(), d = sh.head_dim;
    if (!qkv) return "o";
    return col < sh.heads * d ? "q" : col < (sh.heads + sh.kv_heads) * d ? "k" : "v";
  }
  std::string describe(std::size_t i) const {
    const std::size_t token = i / width(), col = i % width(), d = sh.head_dim;
    const std::size_t q_cols = qkv ? sh.heads * d : 0, k_cols = qkv ? sh.kv_heads * d : 0;
    const std::size_t in_part = col < sh.heads * d ? col : col < sh.heads * d + k_cols ? col - q_cols : col - q_cols - k_cols;
    return "b " + std::to_string(token / sh.seq) + " s " + std::to_string(token % sh.seq) + " " + part(i) + " head " +
           std::to_string(in_part / d) + " dim " + std::to_string(in_part % d);
  }
};

void check_tensor_core(const char* what, twin& t, dtype type, const attention_layout* layout = nullptr) {
  INFO(what);
  const double eps = std::ldexp(1.0, type == dtype::fp16 ? -11 : -8);
  const std::vector<float> reference = t.host_values(), got = t.fetch();
  double largest = 1e-6;
  for (float r : reference) largest = std::max(largest, static_cast<double>(std::abs(r)));
  std::size_t outside = 0, first_outside = got.size();
  double worst = 0;  // error / tolerance
  std::map<std::string, std::size_t> outside_by_part;      // q, k, v or o
  std::map<std::size_t, std::size_t> outside_by_row_tile;  // tokens' position / 64, the kernels' tile
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double error = std::abs(static_cast<double>(got[i]) - reference[i]);
    const double tolerance = eps * largest + 2 * eps * std::abs(reference[i]);
    if (!(error <= tolerance)) {  // NaN counts as outside
      if (outside++ == 0) first_outside = i;
      if (layout) {
        ++outside_by_part[layout->part(i)];
        ++outside_by_row_tile[(i / layout->width()) % layout->sh.seq / 64];
      }
    }
    worst = std::max(worst, error / tolerance);
  }
  std::string where;
  if (outside > 0) {
    where = ", first at " + std::to_string(first_outside);
    if (layout) {
      where += " (" + layout->describe(first_outside) + ")";
      for (const auto& [part, n] : outside_by_part) where += ", " + part + ": " + std::to_string(n);
      for (const auto& [tile, n] : outside_by_row_tile) where += ", rows " + std::to_string(tile * 64) + "+: " + std::to_string(n);
    }
    where += ", got " + std::to_string(got[first_outside]) + " want " + std::to_string(reference[first_outside]);
  }
  INFO("elements outside the tolerance: " << outside << " of " << got.size() << ", worst error / tolerance " << worst
                                          << where);
  CHECK(outside == 0);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string reason = gpu::unavailable_reason();
  if (!reason.empty()) {
    std::printf("SKIPPED: the CUDA kernel tests need a GPU (%s)\n", reason.c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}

TEST_CASE("cuBLAS linear layers match the CPU reference", "[gpu][gemm]") {
  for (dtype t : {dtype::fp32, dtype::bf16, dtype::fp16}) {
    const std::size_t M = 37, N = 29, K = 45;
    twin in(random(M * K, 1), t), w(random(N * K, 2), t), b(random(N, 3), t), out(std::vector<float>(M * N), t);
    const cpu::view bh = b.host(), bd = b.dev();
    cpu::linear_forward(in.host(), w.host(), &bh, out.host(), M, N, K);
    gpu::linear_forward(in.dev(), w.dev(), &bd, out.dev(), M, N, K);
    check_close("forward", out, t);
    twin dout(random(M * N, 4), t), din(random(M * K, 5), t), dw(random(N * K, 6), t), db(random(N, 7), t);
    const cpu::view dbh = db.host(), dbd = db.dev();
    cpu::linear_backward_input(dout.host(), w.host(), din.host(), M, N, K, true);
    gpu::linear_backward_input(dout.dev(), w.dev(), din.dev(), M, N, K, true);
    check_close("backward input", din, t);
    cpu::linear_backward_weight(dout.host(), in.host(), dw.host(), &dbh, M, N, K);
    gpu::linear_backward_weight(dout.dev(), in.dev(), dw.dev(), &dbd, M, N, K);
    check_close("backward weight", dw, t);
    check_close("backward bias", db, t);
  }
}

TEST_CASE("a linear forward with a bias matches the CPU reference through cuBLASLt's epilogue and its fallback",
          "[gpu][gemm]") {
  // GPT-2-like shapes (multiples of 64: cuBLASLt's bias epilogue takes them), then the same product on views
  // one element into their buffers: 2-byte aligned, which the heuristic is told (or the bias, which must be
  // 16-byte aligned, sends it to the broadcast + GEMM path). Both must give the CPU's numbers.
  for (dtype t : {dtype::bf16, dtype::fp16, dtype::fp32}) {
    const std::size_t M = 256, N = 384, K = 128;
    for (std::size_t offset : {0u, 1u}) {
      INFO(dtype_name(t) << ", views " << offset << " element(s) into their buffers");
      twin in(random(M * K + offset, 21), t), w(random(N * K + offset, 22), t), b(random(N + offset, 23), t),
          out(std::vector<float>(M * N + offset), t);
      auto at = [offset](cpu::view v) { return cpu::view{static_cast<unsigned char*>(v.data) + offset * dtype_bytes(v.type), v.type, v.size - offset}; };
      const cpu::view bh = at(b.host()), bd = at(b.dev());
      cpu::linear_forward(at(in.host()), at(w.host()), &bh, at(out.host()), M, N, K);
      gpu::linear_forward(at(in.dev()), at(w.dev()), &bd, at(out.dev()), M, N, K);
      check_close("forward", out, t);
    }
  }
}

TEST_CASE("norms, activations and dropout masks match the CPU reference", "[gpu][norm][activation]") {
  for (dtype t : {dtype::fp32, dtype::bf16}) {
    const std::size_t rows = 13, width = 300;
    twin x(random(rows * width, 8, 2.0f), t), w(random(width, 9), t), b(random(width, 10), t), y(std::vector<float>(rows * width), t);
    cpu::layer_norm_forward(x.host(), w.host(), b.host(), y.host(), rows, width);
    gpu::layer_norm_forward(x.dev(), w.dev(), b.dev(), y.dev(), rows, width);
    check_close("layer norm forward", y, t);
    twin dy(random(rows * width, 11), t), dx(random(rows * width, 12), t), dw(random(width, 13), t), db(random(width, 14), t);
    // Four partial rows for 13 rows: the GPU's blocks take 4, 4, 4 and 1 rows (kernels/cuda/norm.cu).
    twin partials(std::vector<float>(4 * 2 * width), dtype::fp32);
    cpu::layer_norm_backward(x.host(), w.host(), dy.host(), dx.host(), dw.host(), db.host(), partials.host(), rows, width);
    gpu::layer_norm_backward(x.dev(), w.dev(), dy.dev(), dx.dev(), dw.dev(), db.dev(), partials.dev(), rows, width);
    check_close("layer norm dx", dx, t);
    check_close("layer norm dw", dw, t);
    check_close("layer norm db", db, t);
    // The fused residual + norm: residual_dropout then the norm, both sums and outputs as the CPU's.
    std::vector<float> keep = random(rows * width, 30);
    for (float& k : keep) k = k > 0 ? 1.0f : 0.0f;  // a dropout mask: 1 keeps, 0 drops
    twin mask(keep, dtype::u8);
    for (bool rms : {false, true}) {
      twin sum(random(rows * width, 31), t), normed(std::vector<float>(rows * width), t);
      const cpu::view bh = b.host(), bd = b.dev(), mh = mask.host(), md = mask.dev();
      cpu::residual_norm_forward(x.host(), &mh, 1.25f, sum.host(), w.host(), rms ? nullptr : &bh, normed.host(), rows, width);
      gpu::residual_norm_forward(x.dev(), &md, 1.25f, sum.dev(), w.dev(), rms ? nullptr : &bd, normed.dev(), rows, width);
      check_close(rms ? "residual + rms norm: sum" : "residual + layer norm: sum", sum, t);
      check_close(rms ? "residual + rms norm: out" : "residual + layer norm: out", normed, t);
    }
    cpu::rms_norm_forward(x.host(), w.host(), y.host(), rows, width);
    gpu::rms_norm_forward(x.dev(), w.dev(), y.dev(), rows, width);
    check_close("rms norm forward", y, t);
    cpu::rms_norm_backward(x.host(), w.host(), dy.host(), dx.host(), dw.host(), partials.host(), rows, width);
    gpu::rms_norm_backward(x.dev(), w.dev(), dy.dev(), dx.dev(), dw.dev(), partials.dev(), rows, width);
    check_close("rms norm dx", dx, t);
    check_close("rms norm dw", dw, t);

    const std::size_t n = rows * width;
    cpu::gelu_forward(x.host(), y.host(), n);
    gpu::gelu_forward(x.dev(), y.dev(), n);
    check_close("gelu forward", y, t);
    cpu::gelu_backward(x.host(), dy.host(), dx.host(), n);
    gpu::gelu_backward(x.dev(), dy.dev(), dx.dev(), n);
    check_close("gelu backward", dx, t);
    twin up(random(n, 15), t), dg(std::vector<float>(n), t), du(std::vector<float>(n), t);
    cpu::swiglu_forward(x.host(), up.host(), y.host(), n);
    gpu::swiglu_forward(x.dev(), up.dev(), y.dev(), n);
    check_close("swiglu forward", y, t);
    cpu::swiglu_backward(x.host(), up.host(), dy.host(), dg.host(), du.host(), n);
    gpu::swiglu_backward(x.dev(), up.dev(), dy.dev(), dg.dev(), du.dev(), n);
    check_close("swiglu d_gate", dg, t);
    check_close("swiglu d_up", du, t);
  }
  twin mask(std::vector<float>(100000), dtype::u8);
  cpu::dropout_mask(42, 9, 0.1f, mask.host(), 100000);
  gpu::dropout_mask(42, 9, 0.1f, mask.dev(), 100000);
  CHECK(mask.fetch() == mask.host_values());  // the same hash: exactly the same elements dropped
}

// Widths that are a multiple of 8 take the warp-per-row kernels (kernels/cuda/norm.cu); 264 leaves lanes
// with one pack and lanes with two. Two partial rows for 37 rows: chunks of 19 and 18 rows, so each of a
// block's 8 warps takes several rows in turn. The backward keeps a lane's gradient sums in registers up to
// 4 packs a lane (264), or 8 without a bias (2,048: RMSNorm's), and adds each element in shared memory
// beyond (2,048 with LayerNorm's bias, 4,104 for both).
TEST_CASE("norms one warp per row match the CPU reference", "[gpu][norm]") {
  const std::size_t width = GENERATE(264, 2048, 4104);
  for (dtype t : {dtype::fp32, dtype::bf16}) {
    INFO((t == dtype::fp32 ? "fp32" : "bf16") << " width " << width);
    const std::size_t rows = 37;
    twin x(random(rows * width, 40, 2.0f), t), w(random(width, 41), t), dy(random(rows * width, 42), t),
        dx(random(rows * width, 43), t), dw(random(width, 44), t), db(random(width, 45), t),
        partials(std::vector<float>(2 * 2 * width), dtype::fp32), b(random(width, 46), t),
        y(std::vector<float>(rows * width), t);
    cpu::layer_norm_forward(x.host(), w.host(), b.host(), y.host(), rows, width);
    gpu::layer_norm_forward(x.dev(), w.dev(), b.dev(), y.dev(), rows, width);
    check_close("layer norm forward", y, t);
    cpu::rms_norm_forward(x.host(), w.host(), y.host(), rows, width);
    gpu::rms_norm_forward(x.dev(), w.dev(), y.dev(), rows, width);
    check_close("rms norm forward", y, t);
    cpu::layer_norm_backward(x.host(), w.host(), dy.host(), dx.host(), dw.host(), db.host(), partials.host(), rows, width);
    gpu::layer_norm_backward(x.dev(), w.dev(), dy.dev(), dx.dev(), dw.dev(), db.dev(), partials.dev(), rows, width);
    check_close("layer norm dx", dx, t);
    check_close("layer norm dw", dw, t);
    check_close("layer norm db", db, t);
    cpu::rms_norm_backward(x.host(), w.host(), dy.host(), dx.host(), dw.host(), partials.host(), rows, width);
    gpu::rms_norm_backward(x.dev(), w.dev(), dy.dev(), dx.dev(), dw.dev(), partials.dev(), rows, width);
    check_close("rms norm dx", dx, t);
    check_close("rms norm dw", dw, t);
  }
}

TEST_CASE("cross-entropy, AdamW, the overflow check and embeddings match the CPU reference", "[gpu][loss][adamw]") {
  const std::size_t rows = 24, vocab = 1000;
  twin logits(random(rows * vocab, 16, 4.0f), dtype::fp32), d(std::vector<float>(rows * vocab), dtype::bf16);
  std::vector<std::int32_t> targets(rows);
  for (std::size_t r = 0; r < rows; ++r) targets[r] = static_cast<std::int32_t>((r * 37) % vocab);
  twin t(targets);
  twin losses(random(rows, 27), dtype::fp32);  // the row losses are added to what is there
  cpu::cross_entropy_forward_backward(logits.host(), t.host(), d.host(), losses.host(), rows, vocab, vocab, 0.25f);
  gpu::cross_entropy_forward_backward(logits.dev(), t.dev(), d.dev(), losses.dev(), rows, vocab, vocab, 0.25f);
  check_close("token losses", losses, dtype::fp32);
  check_close("d_logits", d, dtype::bf16);
  // In place, as the harness runs it (the fused classifier): bf16 logits overwritten by their gradient.
  twin fused(random(rows * vocab, 29, 4.0f), dtype::bf16), fused_losses(std::vector<float>(rows), dtype::fp32);
  cpu::cross_entropy_forward_backward(fused.host(), t.host(), fused.host(), fused_losses.host(), rows, vocab, vocab, 0.25f);
  gpu::cross_entropy_forward_backward(fused.dev(), t.dev(), fused.dev(), fused_losses.dev(), rows, vocab, vocab, 0.25f);
  check_close("in-place token losses", fused_losses, dtype::fp32);
  check_close("in-place d_logits", fused, dtype::bf16);
  // Rows padded as the harness's (llm.c's padded vocabulary): the padded columns hold large values that would
  // dominate the softmax if read; both backends ignore them and write zero gradient there.
  const std::size_t padded = 1024;
  std::vector<float> wide_values = random(rows * padded, 31, 4.0f);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t v = vocab; v < padded; ++v) wide_values[r * padded + v] = 1e4f;
  twin wide(wide_values, dtype::bf16), wide_losses(std::vector<float>(rows), dtype::fp32);
  cpu::cross_entropy_forward_backward(wide.host(), t.host(), wide.host(), wide_losses.host(), rows, vocab, padded, 0.25f);
  gpu::cross_entropy_forward_backward(wide.dev(), t.dev(), wide.dev(), wide_losses.dev(), rows, vocab, padded, 0.25f);
  check_close("padded token losses", wide_losses, dtype::fp32);
  check_close("padded d_logits", wide, dtype::bf16);
  const std::vector<float> wide_grad = wide.fetch();
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t v = vocab; v < padded; ++v) REQUIRE(wide_grad[r * padded + v] == 0.0f);
  // The packed kernel's edge: a last class in the middle of a 16-byte pack (GPT-2's 50,257 of 50,304), in
  // bf16 and fp16, and fp32 logits (the generic kernel).
  for (const dtype type : {dtype::bf16, dtype::fp16, dtype::fp32}) {
    INFO(dtype_name(type));
    const std::size_t classes = 1001;
    std::vector<float> values = random(rows * padded, 37, 4.0f);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t v = classes; v < padded; ++v) values[r * padded + v] = 1e4f;
    std::vector<std::int32_t> edge_targets = targets;
    edge_targets[0] = static_cast<std::int32_t>(classes - 1);  // the class alone in the straddling pack
    twin et(edge_targets), edge(values, type), edge_losses(std::vector<float>(rows), dtype::fp32);
    cpu::cross_entropy_forward_backward(edge.host(), et.host(), edge.host(), edge_losses.host(), rows, classes, padded, 0.25f);
    gpu::cross_entropy_forward_backward(edge.dev(), et.dev(), edge.dev(), edge_losses.dev(), rows, classes, padded, 0.25f);
    check_close("straddling token losses", edge_losses, dtype::fp32);
    check_close("straddling d_logits", edge, type);
    const std::vector<float> edge_grad = edge.fetch();
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t v = classes; v < padded; ++v) REQUIRE(edge_grad[r * padded + v] == 0.0f);
  }

  const std::size_t n = 5000;
  twin master(random(n, 17), dtype::fp32), g(random(n, 18, 0.01f), dtype::bf16), m(random(n, 19, 0.001f), dtype::fp32),
      v(random(n, 20, 0.0001f), dtype::fp32), w(std::vector<float>(n), dtype::bf16);
  for (std::size_t i = 0; i < n; ++i) v.host().set(i, std::abs(v.host().get(i)));  // a second moment is positive
  gpu::copy_to_device(v.dev().data, v.host().data, n * 4);
  const cpu::adamw_config cfg;
  cpu::adamw_step(cfg, 3, master.host(), g.host(), 0.5f, m.host(), v.host(), w.host(), n);
  gpu::adamw_step(cfg, 3, master.dev(), g.dev(), 0.5f, m.dev(), v.dev(), w.dev(), n);
  check_close("adamw master", master, dtype::fp32);
  check_close("adamw m", m, dtype::fp32);
  check_close("adamw v", v, dtype::fp32);
  check_close("adamw bf16 weights", w, dtype::bf16);
  twin flag(std::vector<std::int32_t>{1});  // stale: the check clears it first
  CHECK_FALSE(gpu::has_non_finite(g.dev(), flag.dev(), n));
  std::vector<float> bad = random(n, 21);
  bad[n - 3] = INFINITY;
  twin with_inf(bad, dtype::fp16);
  CHECK(gpu::has_non_finite(with_inf.dev(), flag.dev(), n));

  const std::size_t b = 2, s = 16, h = 32, V = 50;
  std::vector<std::int32_t> tok(b * s);
  for (std::size_t i = 0; i < tok.size(); ++i) tok[i] = static_cast<std::int32_t>((i * 7) % V);
  twin tokens(tok), wte(random(V * h, 22), dtype::bf16), wpe(random(s * h, 23), dtype::bf16), out(std::vector<float>(b * s * h), dtype::bf16);
  cpu::embedding_forward(tokens.host(), wte.host(), wpe.host(), out.host(), b, s, h);
  gpu::embedding_forward(tokens.dev(), wte.dev(), wpe.dev(), out.dev(), b, s, h);
  check_close("embedding forward", out, dtype::bf16);
  twin dout(random(b * s * h, 24), dtype::fp32), dwte(random(V * h, 25), dtype::fp32), dwpe(random(s * h, 26), dtype::fp32);
  twin scratch(random((V + s) * h, 28), dtype::fp32);  // stale contents: both clear it first
  cpu::embedding_backward(tokens.host(), dout.host(), dwte.host(), dwpe.host(), scratch.host(), b, s, h, V);
  gpu::embedding_backward(tokens.dev(), dout.dev(), dwte.dev(), dwpe.dev(), scratch.dev(), b, s, h, V);
  check_close("embedding d_wte", dwte, dtype::fp32);
  check_close("embedding d_wpe", dwpe, dtype::fp32);
}

TEST_CASE("eager and flash attention and RoPE match the CPU reference", "[gpu][attention]") {
  for (float p : {0.0f, 0.2f}) {
    const cpu::attention_shape sh{2, 40, 4, 2, 16};
    const cpu::attention_dropout drop{p, 11, 12};
    const std::size_t qkv_n = sh.batch * sh.seq * sh.qkv_width(), out_n = sh.batch * sh.seq * sh.out_width();
    const std::size_t probs = sh.batch * sh.heads * sh.seq * sh.seq, rows = sh.batch * sh.heads * sh.seq;
    twin qkv(random(qkv_n, 27, 1.5f), dtype::fp32), sm(std::vector<float>(probs), dtype::fp32),
        mask(std::vector<float>(probs), dtype::u8), dropped(std::vector<float>(probs), dtype::fp32),
        out(std::vector<float>(out_n), dtype::fp32);
    cpu::eager_attention_forward(sh, qkv.host(), sm.host(), mask.host(), dropped.host(), drop, out.host());
    gpu::eager_attention_forward(sh, qkv.dev(), sm.dev(), mask.dev(), dropped.dev(), drop, out.dev());
    check_close("eager forward", out, dtype::fp32);
    check_close("eager softmax", sm, dtype::fp32);
    twin dout(random(out_n, 28), dtype::fp32), scores(std::vector<float>(probs), dtype::fp32), dqkv(std::vector<float>(qkv_n), dtype::fp32);
    cpu::eager_attention_backward(sh, qkv.host(), sm.host(), mask.host(), dropped.host(), drop, dout.host(), scores.host(), dqkv.host());
    gpu::eager_attention_backward(sh, qkv.dev(), sm.dev(), mask.dev(), dropped.dev(), drop, dout.dev(), scores.dev(), dqkv.dev());
    check_close("eager backward", dqkv, dtype::fp32);

    twin fout(std::vector<float>(out_n), dtype::fp32), lse(std::vector<float>(rows), dtype::fp32),
        delta(std::vector<float>(rows), dtype::fp32), fd(std::vector<float>(qkv_n), dtype::fp32);
    cpu::flash_attention_forward(sh, qkv.host(), drop, fout.host(), lse.host());
    gpu::flash_attention_forward(sh, qkv.dev(), drop, fout.dev(), lse.dev());
    check_close("flash forward", fout, dtype::fp32);
    check_close("flash lse", lse, dtype::fp32);
    cpu::flash_attention_backward(sh, qkv.host(), fout.host(), lse.host(), drop, dout.host(), delta.host(), fd.host());
    gpu::flash_attention_backward(sh, qkv.dev(), fout.dev(), lse.dev(), drop, dout.dev(), delta.dev(), fd.dev());
    check_close("flash backward", fd, dtype::fp32);

    cpu::rope_apply(sh, qkv.host(), false);
    gpu::rope_apply(sh, qkv.dev(), false);
    check_close("rope", qkv, dtype::fp32);
  }
}

TEST_CASE("eager attention in 16-bit types matches the CPU reference", "[gpu][attention]") {
  // Both sides store the scores in the probabilities' dtype before the softmax (PyTorch's eager attention
  // does the same under autocast), so they differ only in summation order: check_close's 16-bit tolerance.
  // With every operand in one dtype the cuBLAS path runs; an fp32 output and input gradient (mixed dtypes)
  // send the same shapes down the scalar kernels.
  for (const dtype type : {dtype::bf16, dtype::fp16})
    for (float p : {0.0f, 0.2f})
      for (const bool cublas_path : {true, false}) {
        INFO("type " << dtype_name(type) << " p " << p << (cublas_path ? " cuBLAS" : " scalar kernels"));
        const cpu::attention_shape sh{2, 40, 4, 2, 16};
        const cpu::attention_dropout drop{p, 11, 12};
        const std::size_t qkv_n = sh.batch * sh.seq * sh.qkv_width(), out_n = sh.batch * sh.seq * sh.out_width();
        const std::size_t probs = sh.batch * sh.heads * sh.seq * sh.seq;
        const dtype out_type = cublas_path ? type : dtype::fp32;
        twin qkv(random(qkv_n, 31, 1.5f), type), sm(std::vector<float>(probs), type), mask(std::vector<float>(probs), dtype::u8),
            dropped(std::vector<float>(probs), type), out(std::vector<float>(out_n), out_type);
        cpu::eager_attention_forward(sh, qkv.host(), sm.host(), mask.host(), dropped.host(), drop, out.host());
        gpu::eager_attention_forward(sh, qkv.dev(), sm.dev(), mask.dev(), dropped.dev(), drop, out.dev());
        check_close("eager forward", out, type);  // the 16-bit probabilities bound the error either way
        check_close("eager softmax", sm, type);
        twin dout(random(out_n, 32), out_type), scores(std::vector<float>(probs), type), dqkv(std::vector<float>(qkv_n), out_type);
        cpu::eager_attention_backward(sh, qkv.host(), sm.host(), mask.host(), dropped.host(), drop, dout.host(), scores.host(), dqkv.host());
        gpu::eager_attention_backward(sh, qkv.dev(), sm.dev(), mask.dev(), dropped.dev(), drop, dout.dev(), scores.dev(), dqkv.dev());
        check_close("eager backward", dqkv, type);
      }
}

// fp32 flash attention: head dims in {16, ..., 128} take the CUDA-core kernels (kernels/cuda/attention_flash_simt.cu:
// 64 rows a block, tiles of 32 rows), others the simple kernels. Several query blocks with a ragged last one, a
// ragged last tile, GQA, dropout, and one head dim (20) off the tiled path.
TEST_CASE("fp32 flash attention matches the CPU reference on and off the tiled path", "[gpu][attention][flash]") {
  struct flash_run {
    cpu::attention_shape sh;
    float p;
  };
  const flash_run runs[] = {
      {{2, 100, 4, 2, 64}, 0.1f},  // two query blocks (the second of 36 rows), key tiles 32 + 32 + 32 + 4
      {{1, 70, 2, 1, 128}, 0.0f},  // one group of 2, the largest head dim
      {{1, 33, 3, 3, 48}, 0.2f},   // no grouping, a tile of one row at the end
      {{1, 33, 3, 1, 20}, 0.1f},   // head dim 20: the simple kernels
  };
  for (const flash_run& run : runs) {
    const cpu::attention_shape& sh = run.sh;
    INFO("b " << sh.batch << " s " << sh.seq << " a " << sh.heads << " kv " << sh.kv_heads << " d " << sh.head_dim << " p "
              << run.p);
    const cpu::attention_dropout drop{run.p, 11, 12};
    const std::size_t qkv_n = sh.batch * sh.seq * sh.qkv_width(), out_n = sh.batch * sh.seq * sh.out_width();
    const std::size_t rows = sh.batch * sh.heads * sh.seq;
    twin qkv(random(qkv_n, 31, 1.5f), dtype::fp32), out(std::vector<float>(out_n), dtype::fp32),
        lse(std::vector<float>(rows), dtype::fp32);
    cpu::flash_attention_forward(sh, qkv.host(), drop, out.host(), lse.host());
    gpu::flash_attention_forward(sh, qkv.dev(), drop, out.dev(), lse.dev());
    check_close("fp32 flash forward", out, dtype::fp32);
    check_close("fp32 flash lse", lse, dtype::fp32);
    twin ref_out(out.host_values(), dtype::fp32), ref_lse(lse.host_values(), dtype::fp32), dout(random(out_n, 32), dtype::fp32),
        delta(std::vector<float>(rows), dtype::fp32), dqkv(std::vector<float>(qkv_n), dtype::fp32);
    cpu::flash_attention_backward(sh, qkv.host(), ref_out.host(), ref_lse.host(), drop, dout.host(), delta.host(), dqkv.host());
    gpu::flash_attention_backward(sh, qkv.dev(), ref_out.dev(), ref_lse.dev(), drop, dout.dev(), delta.dev(), dqkv.dev());
    check_close("fp32 flash delta", delta, dtype::fp32);
    check_close("fp32 flash backward", dqkv, dtype::fp32);
  }
}

// Both tensor-core kernel sets (kernels/cuda/ops.hpp flash_kernel) take the same shapes; each is checked.
TEST_CASE("tensor-core flash attention, mma and wmma, matches the CPU reference", "[gpu][attention][flash]") {
  const gpu::flash_kernel kernel = GENERATE(gpu::flash_kernel::mma, gpu::flash_kernel::wmma);
  INFO("flash kernels " << gpu::flash_kernel_name(kernel));
  const gpu::flash_kernel before = gpu::selected_flash_kernel();
  gpu::set_flash_kernel(kernel);
  struct flash_run {
    cpu::attention_shape sh;
    float p;
    dtype type;
  };
  // Most runs have a ragged last query and key tile (s not a multiple of the 64-row tile); one has none.
  const flash_run runs[] = {
      {{2, 200, 4, 2, 64}, 0.0f, dtype::bf16},   // GPT-2's head_dim, GQA groups of 2, 3 tiles + 8 rows
      {{2, 200, 4, 2, 64}, 0.1f, dtype::bf16},   // the same with dropout on the probabilities
      {{1, 130, 4, 1, 128}, 0.1f, dtype::bf16},  // Llama's head_dim, one group of 4, a last tile of 2 rows
      {{2, 72, 2, 1, 32}, 0.0f, dtype::fp16},    // fp16, head_dim 32
      {{2, 40, 4, 2, 16}, 0.2f, dtype::bf16},    // the fallback test's shape: a single partial tile
      {{1, 256, 6, 2, 64}, 0.0f, dtype::bf16},   // whole tiles only (s a multiple of 64), groups of 3
      {{1, 100, 2, 2, 96}, 0.1f, dtype::fp16},   // no grouping, head_dim 96, fp16 with dropout
  };
  for (const flash_run& run : runs) {
    const cpu::attention_shape& sh = run.sh;
    INFO("b " << sh.batch << " s " << sh.seq << " a " << sh.heads << " kv " << sh.kv_heads << " d " << sh.head_dim
              << " p " << run.p << (run.type == dtype::fp16 ? " fp16" : " bf16"));
    const cpu::attention_dropout drop{run.p, 11, 12};
    const std::size_t qkv_n = sh.batch * sh.seq * sh.qkv_width(), out_n = sh.batch * sh.seq * sh.out_width();
    const std::size_t rows = sh.batch * sh.heads * sh.seq;
    twin qkv(random(qkv_n, 27, 1.5f), run.type), out(std::vector<float>(out_n), run.type),
        lse(std::vector<float>(rows), dtype::fp32);
    cpu::flash_attention_forward(sh, qkv.host(), drop, out.host(), lse.host());
    gpu::flash_attention_forward(sh, qkv.dev(), drop, out.dev(), lse.dev());
    const attention_layout out_layout{sh, false}, qkv_layout{sh, true};
    check_tensor_core("tiled flash forward", out, run.type, &out_layout);
    check_close("tiled flash lse", lse, dtype::fp32);

    // Both backwards read the CPU's out and lse, so the backward is checked on its own.
    twin ref_out(out.host_values(), run.type), ref_lse(lse.host_values(), dtype::fp32), dout(random(out_n, 28), run.type),
        delta(std::vector<float>(rows), dtype::fp32), dqkv(std::vector<float>(qkv_n), run.type);
    cpu::flash_attention_backward(sh, qkv.host(), ref_out.host(), ref_lse.host(), drop, dout.host(), delta.host(), dqkv.host());
    gpu::flash_attention_backward(sh, qkv.dev(), ref_out.dev(), ref_lse.dev(), drop, dout.dev(), delta.dev(), dqkv.dev());
    check_close("flash delta", delta, dtype::fp32);
    check_tensor_core("tiled flash backward", dqkv, run.type, &qkv_layout);
  }
  gpu::set_flash_kernel(before);
}

TEST_CASE("16-bit flash attention with a head_dim off the tiled path falls back and matches", "[gpu][attention][flash]") {
  // head_dim 24 is not a multiple of 16: the one-thread-per-row kernels run, in fp32 with one rounding
  // per store, so the bf16 tolerance of check_close applies.
  const cpu::attention_shape sh{1, 30, 2, 2, 24};
  const cpu::attention_dropout drop{0.1f, 11, 12};
  const std::size_t qkv_n = sh.batch * sh.seq * sh.qkv_width(), out_n = sh.batch * sh.seq * sh.out_width();
  const std::size_t rows = sh.batch * sh.heads * sh.seq;
  twin qkv(random(qkv_n, 27, 1.5f), dtype::bf16), out(std::vector<float>(out_n), dtype::bf16),
      lse(std::vector<float>(rows), dtype::fp32);
  cpu::flash_attention_forward(sh, qkv.host(), drop, out.host(), lse.host());
  gpu::flash_attention_forward(sh, qkv.dev(), drop, out.dev(), lse.dev());
  check_close("fallback flash forward", out, dtype::bf16);
  check_close("fallback flash lse", lse, dtype::fp32);
  twin ref_out(out.host_values(), dtype::bf16), ref_lse(lse.host_values(), dtype::fp32), dout(random(out_n, 28), dtype::bf16),
      delta(std::vector<float>(rows), dtype::fp32), dqkv(std::vector<float>(qkv_n), dtype::bf16);
  cpu::flash_attention_backward(sh, qkv.host(), ref_out.host(), ref_lse.host(), drop, dout.host(), delta.host(), dqkv.host());
  gpu::flash_attention_backward(sh, qkv.dev(), ref_out.dev(), ref_lse.dev(), drop, dout.dev(), delta.dev(), dqkv.dev());
  check_close("fallback flash backward", dqkv, dtype::bf16);
}

TEST_CASE("vectorised pointwise kernels: aligned packs, tails and misaligned pointers", "[gpu][pointwise]") {
  // The pointwise kernels move 8 elements per thread in 128-bit accesses when every pointer is aligned for a
  // pack (16 bytes; 8 for a u8 mask), then finish the last n % 8 one at a time; a misaligned pointer sends the
  // whole call one element at a time. So: n a multiple of 8 with aligned buffers (the pack path alone), an odd
  // n (packs and a tail), and the views shifted by one element (every pointer misaligned: the scalar path).
  struct run {
    std::size_t n, offset;
    const char* path;
  };
  const run runs[] = {{4096, 0, "packs"}, {1001, 0, "packs and a tail of 1"}, {1001, 1, "misaligned: one by one"}};
  for (dtype t : {dtype::fp32, dtype::bf16}) {
    for (const run& r : runs) {
      const std::size_t n = r.n, off = r.offset, total = n + off;
      INFO((t == dtype::fp32 ? "fp32, n " : "bf16, n ") << n << ", " << r.path);
      auto at = [&](const cpu::view& v) { return v.slice(off, n); };
      std::vector<float> keep(total), positive = random(total, 40, 0.001f);
      for (std::size_t i = 0; i < total; ++i) keep[i] = cpu::uniform_hash(41, 3, i) >= 0.25 ? 1.0f : 0.0f;
      for (float& p : positive) p = std::abs(p);
      twin mask(keep, dtype::u8);
      const cpu::view mask_h = at(mask.host()), mask_d = at(mask.dev());
      const float keep_scale = 1.0f / 0.75f;

      twin x(random(total, 30, 3.0f), t), y(std::vector<float>(total), t);
      cpu::gelu_forward(at(x.host()), at(y.host()), n);
      gpu::gelu_forward(at(x.dev()), at(y.dev()), n);
      check_close("gelu forward", y, t);
      twin dy(random(total, 31), t);  // in place: dx is dy
      cpu::gelu_backward(at(x.host()), at(dy.host()), at(dy.host()), n);
      gpu::gelu_backward(at(x.dev()), at(dy.dev()), at(dy.dev()), n);
      check_close("gelu backward in place", dy, t);

      twin up(random(total, 32), t), d(random(total, 33), t), du(std::vector<float>(total), t);
      cpu::swiglu_forward(at(x.host()), at(up.host()), at(y.host()), n);
      gpu::swiglu_forward(at(x.dev()), at(up.dev()), at(y.dev()), n);
      check_close("swiglu forward", y, t);
      // As the harness calls it: d_gate written over dy.
      cpu::swiglu_backward(at(x.host()), at(up.host()), at(d.host()), at(d.host()), at(du.host()), n);
      gpu::swiglu_backward(at(x.dev()), at(up.dev()), at(d.dev()), at(d.dev()), at(du.dev()), n);
      check_close("swiglu d_gate (over dy)", d, t);
      check_close("swiglu d_up", du, t);

      twin res(random(total, 34), t), ry(random(total, 35), t), ry2(random(total, 36), t);
      cpu::residual_dropout(at(res.host()), &mask_h, keep_scale, at(ry.host()), n);
      gpu::residual_dropout(at(res.dev()), &mask_d, keep_scale, at(ry.dev()), n);
      check_close("residual dropout with a mask", ry, t);
      cpu::residual_dropout(at(res.host()), nullptr, keep_scale, at(ry2.host()), n);
      gpu::residual_dropout(at(res.dev()), nullptr, keep_scale, at(ry2.dev()), n);
      check_close("residual dropout without a mask", ry2, t);

      twin din(random(total, 37), t), dout(std::vector<float>(total), t);
      cpu::dropout_apply(at(din.host()), &mask_h, keep_scale, at(din.host()), n);  // in place
      gpu::dropout_apply(at(din.dev()), &mask_d, keep_scale, at(din.dev()), n);
      check_close("dropout apply with a mask, in place", din, t);
      cpu::dropout_apply(at(din.host()), nullptr, keep_scale, at(dout.host()), n);
      gpu::dropout_apply(at(din.dev()), nullptr, keep_scale, at(dout.dev()), n);
      check_close("dropout apply without a mask", dout, t);

      twin wide(std::vector<float>(total), dtype::fp32), narrow(std::vector<float>(total), t);
      cpu::convert(at(x.host()), at(wide.host()), n);  // t to fp32
      gpu::convert(at(x.dev()), at(wide.dev()), n);
      check_close("convert to fp32", wide, dtype::fp32);
      twin source(random(total, 38, 2.0f), dtype::fp32);
      cpu::convert(at(source.host()), at(narrow.host()), n);  // fp32 to t
      gpu::convert(at(source.dev()), at(narrow.dev()), n);
      check_close("convert from fp32", narrow, t);
      cpu::fill(at(narrow.host()), -0.375f, n);
      gpu::fill(at(narrow.dev()), -0.375f, n);
      check_close("fill", narrow, t);

      twin acc(random(total, 39), dtype::fp32), grad(random(total, 42), t);
      cpu::accumulate_and_clear(at(acc.host()), at(grad.host()), n);
      gpu::accumulate_and_clear(at(acc.dev()), at(grad.dev()), n);
      check_close("accumulate into fp32", acc, dtype::fp32);
      check_close("accumulate: source cleared", grad, t);

      const cpu::adamw_config cfg;
      twin master(random(total, 43), dtype::fp32), g(random(total, 44, 0.01f), t), m(random(total, 45, 0.001f), dtype::fp32),
          v(positive, dtype::fp32), copy(std::vector<float>(total), t);
      cpu::adamw_step(cfg, 3, at(master.host()), at(g.host()), 0.5f, at(m.host()), at(v.host()), at(copy.host()), n);
      gpu::adamw_step(cfg, 3, at(master.dev()), at(g.dev()), 0.5f, at(m.dev()), at(v.dev()), at(copy.dev()), n);
      check_close("adamw master (with a copy)", master, dtype::fp32);
      check_close("adamw m", m, dtype::fp32);
      check_close("adamw v", v, dtype::fp32);
      check_close("adamw low-precision copy", copy, t);
      // No master and no copy: the weights (of dtype t) are updated themselves.
      twin weights(random(total, 46), t), m2(random(total, 45, 0.001f), dtype::fp32), v2(positive, dtype::fp32);
      cpu::adamw_step(cfg, 3, at(weights.host()), at(g.host()), 0.5f, at(m2.host()), at(v2.host()), cpu::view{}, n);
      gpu::adamw_step(cfg, 3, at(weights.dev()), at(g.dev()), 0.5f, at(m2.dev()), at(v2.dev()), cpu::view{}, n);
      check_close("adamw weights (no copy)", weights, t);
      check_close("adamw m (no copy)", m2, dtype::fp32);
      check_close("adamw v (no copy)", v2, dtype::fp32);
    }
  }

  // More elements than the capped grid has threads (132 x 16 blocks of 256): every thread loops, on both paths.
  for (std::size_t off : {std::size_t{0}, std::size_t{1}}) {
    INFO("grid-stride, offset " << off);
    const std::size_t n = 9'000'003, total = n + off;
    twin in(random(total, 47, 3.0f), dtype::bf16), out(std::vector<float>(total), dtype::bf16);
    const cpu::view ih = in.host().slice(off, n), id = in.dev().slice(off, n), oh = out.host().slice(off, n),
                    od = out.dev().slice(off, n);
    cpu::gelu_forward(ih, oh, n);
    gpu::gelu_forward(id, od, n);
    check_close("gelu forward, grid-stride", out, dtype::bf16);
  }
}
