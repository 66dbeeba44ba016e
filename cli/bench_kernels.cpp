// `plan bench --kernels` (bench_kernels.hpp): each kernel of a step at one model's shapes, in buffers from the
// backend's memory, timed after a warm-up run and set beside its roofline (FLOPs at the bf16 dense peak or bytes
// at the memory bandwidth, the data/gpus.json figures).
#include "cli/bench_kernels.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <initializer_list>

#include "planner/profiles/registry.hpp"
#include "planner/profiles/trainplan/trainplan_profile.hpp"
#include "planner/util/checked_math.hpp"
#include "planner/memory/inventory.hpp"
#include "planner/model/param_count.hpp"

namespace trainplan::cli {
namespace {

// A buffer of the benchmark, from the backend's memory (zero-filled), returned when it goes away.
class bench_buffer {
 public:
  bench_buffer(const kernels::kernel_ops& ops, std::uint64_t elements, dtype type)
      : ops_(ops), elements_(elements), type_(type) {
    data_ = ops.alloc(static_cast<std::size_t>(checked_mul(elements, dtype_bytes(type), "benchmark buffer")));
  }
  ~bench_buffer() { ops_.release(data_); }
  bench_buffer(const bench_buffer&) = delete;
  bench_buffer& operator=(const bench_buffer&) = delete;
  kernels::view view() const { return {data_, type_, static_cast<std::size_t>(elements_)}; }

 private:
  const kernels::kernel_ops& ops_;
  std::uint64_t elements_;
  dtype type_;
  void* data_ = nullptr;
};

constexpr int repetitions = 10;  // after one warm-up call; the mean includes each launch

}  // namespace

std::vector<kernel_timing> time_kernels(const kernels::kernel_ops& ops, const gpu_spec& gpu, const model_spec& m,
                                        std::uint64_t batch, std::uint64_t seq,
                                        const char* (*flash_kernel)(const char*),
                                        const std::function<void(const kernel_timing&)>& on_row) {
  const std::uint64_t T = checked_mul(batch, seq, "tokens"), h = m.hidden, f = m.ffn, V = m.vocab, a = m.heads,
                      d = m.head_dim, qkv_w = m.qkv_width(), out_w = a * d;
  // The harness's vocabulary tables and logits are padded as llm.c's (planner/model/param_count.hpp vocab_rows); V
  // stays the class count.
  const std::uint64_t Vp = vocab_rows(m, harness_profile().traits.vocab_pad_multiple);
  const bool gpt = m.family == model_family::gpt;
  const dtype bf16 = dtype::bf16, fp32 = dtype::fp32;
  const double peak_flops = gpu.peak_flops_per_s(bf16).value_or(0), bandwidth = gpu.memory_bandwidth_bytes_per_s;
  const std::string tokens = fmt::format("b{} s{}", batch, seq);
  std::vector<kernel_timing> out;

  auto time = [&](const char* name, std::string shape, double flops, double bytes, const std::function<void()>& run) {
    run();
    ops.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < repetitions; ++k) run();
    ops.synchronize();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / repetitions;
    const double roofline = std::max(peak_flops > 0 ? flops / peak_flops : 0.0, bandwidth > 0 ? bytes / bandwidth : 0.0);
    out.push_back({name, std::move(shape), flops, bytes, seconds, roofline});
    if (on_row) on_row(out.back());
  };
  const double b2 = 2.0, b4 = 4.0;  // bytes per bf16 and fp32 element

  {  // GEMMs: the widest of a layer (the MLP's first) and the head; row-major out (M, N) = in (M, K) W (N, K)^T
    const std::uint64_t fc_n = f;  // GPT's fc, or one of Llama's gate and up (f, h) each
    bench_buffer in(ops, T * h, bf16), w(ops, fc_n * h, bf16), y(ops, T * fc_n, bf16), dw(ops, fc_n * h, bf16),
        dx(ops, T * h, bf16);
    const double fl = 2.0 * T * fc_n * h, by = b2 * (T * h + fc_n * h + T * fc_n);
    const std::string shape = fmt::format("{}x{}x{}", T, fc_n, h);
    time("linear_forward", shape, fl, by, [&] { ops.linear_forward(in.view(), w.view(), nullptr, y.view(), T, fc_n, h); });
    time("linear_backward_input", shape, fl, by,
         [&] { ops.linear_backward_input(y.view(), w.view(), dx.view(), T, fc_n, h, false); });
    time("linear_backward_weight", shape, fl, by + b2 * fc_n * h,
         [&] { ops.linear_backward_weight(y.view(), in.view(), dw.view(), nullptr, T, fc_n, h); });
  }
  {
    bench_buffer in(ops, T * h, bf16), w(ops, Vp * h, bf16), logits(ops, T * Vp, bf16);
    time("linear_forward (head)", fmt::format("{}x{}x{}", T, Vp, h), 2.0 * T * Vp * h, b2 * (T * h + Vp * h + T * Vp),
         [&] { ops.linear_forward(in.view(), w.view(), nullptr, logits.view(), T, Vp, h); });
  }
  {  // norms over (T, h)
    bench_buffer x(ops, T * h, bf16), w(ops, h, bf16), bias(ops, h, bf16), y(ops, T * h, bf16), dy(ops, T * h, bf16),
        dx(ops, T * h, bf16), dw(ops, h, bf16), db(ops, h, bf16),
        partials(ops, std::min<std::uint64_t>(T, harness_norm_partial_rows) * 2 * h, fp32);
    const std::string shape = fmt::format("{} x {}", T, h);
    if (gpt) {
      time("layer_norm_forward", shape, 0, b2 * 2 * T * h,
           [&] { ops.layer_norm_forward(x.view(), w.view(), bias.view(), y.view(), T, h); });
      time("layer_norm_backward", shape, 0, b2 * 4 * T * h,
           [&] { ops.layer_norm_backward(x.view(), w.view(), dy.view(), dx.view(), dw.view(), db.view(), partials.view(), T, h); });
    } else {
      time("rms_norm_forward", shape, 0, b2 * 2 * T * h, [&] { ops.rms_norm_forward(x.view(), w.view(), y.view(), T, h); });
      time("rms_norm_backward", shape, 0, b2 * 4 * T * h,
           [&] { ops.rms_norm_backward(x.view(), w.view(), dy.view(), dx.view(), dw.view(), partials.view(), T, h); });
    }
    time("residual_dropout", shape, 0, b2 * 3 * T * h, [&] { ops.residual_dropout(x.view(), nullptr, 1.0f, y.view(), T * h); });
  }
  {  // activations over (T, f)
    const std::uint64_t n = T * f;
    bench_buffer x(ops, n, bf16), up(ops, n, bf16), y(ops, n, bf16), dy(ops, n, bf16), dx(ops, n, bf16);
    const std::string shape = fmt::format("{} x {}", T, f);
    if (gpt) {
      time("gelu_forward", shape, 0, b2 * 2 * n, [&] { ops.gelu_forward(x.view(), y.view(), n); });
      time("gelu_backward", shape, 0, b2 * 3 * n, [&] { ops.gelu_backward(x.view(), dy.view(), dx.view(), n); });
    } else {
      time("swiglu_forward", shape, 0, b2 * 3 * n, [&] { ops.swiglu_forward(x.view(), up.view(), y.view(), n); });
      time("swiglu_backward", shape, 0, b2 * 5 * n,
           [&] { ops.swiglu_backward(x.view(), up.view(), dy.view(), dx.view(), y.view(), n); });
    }
  }
  {  // attention: causal, so half the s x s products (FlashAttention-2's accounting); backward 2.5x forward
    const kernels::attention_shape sh{batch, seq, a, m.kv_heads, d};
    const kernels::attention_dropout none{};
    bench_buffer qkv(ops, T * qkv_w, bf16), o(ops, T * out_w, bf16), d_out(ops, T * out_w, bf16), d_qkv(ops, T * qkv_w, bf16),
        lse(ops, batch * a * seq, fp32), delta(ops, batch * a * seq, fp32);
    const double fwd_flops = 2.0 * batch * a * seq * seq * d;
    const double io = b2 * (T * qkv_w + T * out_w);
    const std::string shape = fmt::format("{} a{} kv{} d{}", tokens, a, m.kv_heads, d);
    if (!gpt) time("rope_apply", shape, 0, b2 * 2 * T * (a + m.kv_heads) * d, [&] { ops.rope_apply(sh, qkv.view(), false); });
    const std::string selected = flash_kernel ? flash_kernel(nullptr) : "";
    for (const char* variant : {"mma", "wmma"}) {
      if (flash_kernel && flash_kernel(variant) == nullptr) continue;
      const std::string suffix = flash_kernel ? fmt::format(" ({})", variant) : "";
      time(("flash_attention_forward" + suffix).c_str(), shape, fwd_flops, io,
           [&] { ops.flash_attention_forward(sh, qkv.view(), none, o.view(), lse.view()); });
      time(("flash_attention_backward" + suffix).c_str(), shape, 2.5 * fwd_flops, 2 * io, [&] {
        ops.flash_attention_backward(sh, qkv.view(), o.view(), lse.view(), none, d_out.view(), delta.view(), d_qkv.view());
      });
      if (!flash_kernel) break;  // the backend's own choice, timed once
    }
    if (flash_kernel) flash_kernel(selected.c_str());
    const std::uint64_t probs = checked_product({batch, a, seq, seq}, "attention probabilities");
    bench_buffer softmax(ops, probs, bf16), d_scores(ops, probs, bf16);
    const kernels::view empty{};
    time("eager_attention_forward", shape, fwd_flops, io + b2 * probs,
         [&] { ops.eager_attention_forward(sh, qkv.view(), softmax.view(), empty, empty, none, o.view()); });
    time("eager_attention_backward", shape, 2.5 * fwd_flops, 2 * io + b2 * 3 * probs, [&] {
      ops.eager_attention_backward(sh, qkv.view(), softmax.view(), empty, empty, none, d_out.view(), d_scores.view(),
                                   d_qkv.view());
    });
  }
  {  // the loss as the harness runs it: the fused classifier, the gradient written over the bf16 logits
    bench_buffer logits(ops, T * Vp, bf16), targets(ops, T, dtype::i32), losses(ops, T, fp32);
    time("cross_entropy_forward_backward", fmt::format("{} x {} of {}, in place", T, V, Vp), 0, b2 * T * (V + Vp), [&] {
      ops.cross_entropy_forward_backward(logits.view(), targets.view(), logits.view(), losses.view(), T, V, Vp, 1.0f);
    });
  }
  {  // embeddings (and their fp32 gradient scratch)
    const std::uint64_t positions = m.max_positions > 0 ? seq : 0;
    bench_buffer tokens_buf(ops, T, dtype::i32), wte(ops, Vp * h, bf16), wpe(ops, std::max<std::uint64_t>(positions, 1) * h, bf16),
        x(ops, T * h, bf16), d_wte(ops, Vp * h, bf16), d_wpe(ops, std::max<std::uint64_t>(positions, 1) * h, bf16),
        scratch(ops, (V + positions) * h, fp32);
    const kernels::view no_positions{};
    const std::string shape = fmt::format("{} x {}, vocab {}", T, h, V);
    time("embedding_forward", shape, 0, b2 * 2 * T * h, [&] {
      ops.embedding_forward(tokens_buf.view(), wte.view(), positions ? wpe.view() : no_positions, x.view(), batch, seq, h);
    });
    time("embedding_backward", shape, 0, b2 * T * h + (b4 * 2 + b2 * 2) * (V + positions) * h, [&] {
      ops.embedding_backward(tokens_buf.view(), x.view(), d_wte.view(), positions ? d_wpe.view() : no_positions,
                             scratch.view(), batch, seq, h, V);
    });
  }
  {  // AdamW over every parameter: fp32 master, m, v read and written, bf16 gradient read, bf16 weights written
    const std::uint64_t P = count_params(with_vocab_rows(m, Vp)).total;
    bench_buffer master(ops, P, fp32), grads(ops, P, bf16), mom(ops, P, fp32), var(ops, P, fp32), weights(ops, P, bf16);
    const kernels::adamw_config cfg;
    time("adamw_step", fmt::format("{} parameters", P), 0, (b4 * 6 + b2 * 2) * P, [&] {
      ops.adamw_step(cfg, 2, master.view(), grads.view(), 1.0f, mom.view(), var.view(), weights.view(), P);
    });
  }
  return out;
}

}  // namespace trainplan::cli
