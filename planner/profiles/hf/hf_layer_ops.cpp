// The hf profile's op lists (hf_layer_ops.hpp): GPT-2's block and the Llama family's decoder layer, each
// operation with the rows it makes (activations_hf_rows.hpp) and the kernels it launches; and the kernels of the
// embedding, final norm, head and loss. PyTorch eager runs every Python operation of a Hugging Face model as
// its own kernel (or two, in backward). What each kernel counts, per pass, follows the modeling code
// (transformers 5.17: modeling_gpt2.py, modeling_llama.py, loss_utils.py) and the autocast op lists (torch 2.11,
// autocast_mode.cpp), and agrees with the tensors autograd saved in ../shared/measurements
// (tests/data/measurements). Elementwise bytes are what each kernel reads and writes once; backward kernels
// are autograd's formulas (tools/autograd/derivatives.yaml): a product's backward is two products, a unary
// op's one kernel, and a tensor used twice gets its gradients summed by one more kernel.
#include "planner/profiles/hf/hf_layer_ops.hpp"

#include "planner/profiles/hf/activations_hf_rows.hpp"
#include "planner/profiles/hf/hf_sdpa.hpp"

namespace trainplan {

using namespace hf_rows;  // the rows' tables (activations_hf_rows.hpp)

namespace {

double size_of(dtype t) { return static_cast<double>(dtype_bytes(t)); }

// One pass of the layer in elements (T tokens, s sequence, h hidden, f an MLP's width, widths of q, k and v)
// and dtypes in bytes.
struct hf_shape {
  double T, s, h, f, qw, kvw, E, F, heads, d, batches;
  double vw, ow, dv;  // value width, attention output width, value head size (kvw, qw, d but with MLA)
  double c;   // GEMM output / autocast dtype bytes
  double r;   // residual stream and norm dtype (fp32 under autocast: the model's weights are fp32)
  double w;   // weight dtype bytes
  bool amp;   // autocast: casts of GEMM inputs and weights
  bool trains = true;  // the base's weights train (LoRA: frozen, no weight gradients)
  bool mask = false;   // a sliding-window mask: k and v repeated to every head, the mask made a bias
  double adapter = 4;  // LoRA adapters' dtype bytes (peft: fp32)
  bool lora_dropout = false;  // peft's lora_dropout above 0: each adapted module drops out its input
};

// LayerNorm (GPT-2): one kernel forward; backward one for the input gradient and one for gamma and beta.
void layer_norm(ops::row_group& g, std::string_view name, const hf_shape& x) {
  g.add(name, op_class::elementwise, 2 * x.E * x.r, 1, 5 * x.E * x.r, 2);
}

// LlamaRMSNorm: x.to(fp32), x.pow(2).mean(-1), + eps, rsqrt, x * rsqrt, .to(input dtype), weight * x:
// the casts are no-ops when the stream is already fp32 (autocast).
void rms_norm(ops::row_group& g, std::string_view name, const hf_shape& x) {
  const double casts = x.r == 4 ? 0 : 2;
  const double fwd = 4 * 2 * x.E + 4 * x.E + 2 * x.E * (4 + x.r) + casts * x.E * (4 + x.r);
  // pow, mean, rsqrt, the two products (two kernels each), the two casts and one gradient sum.
  g.add(name, op_class::elementwise, fwd, 6 + casts, 2 * fwd, 9 + casts);
}

// Autocast casts an fp32 GEMM input to the compute dtype (one kernel) and its gradient back (one kernel).
void input_cast(ops::row_group& g, std::string_view name, double elements, const hf_shape& x, double count = 1) {
  if (!x.amp) return;
  g.add(name, op_class::elementwise, count * elements * (4 + x.c), count, count * elements * (4 + x.c), count);
}

// A linear layer: the GEMM, autocast's copy of the weight (once per forward; its cache is cleared when
// the autocast region exits, so recomputation casts again; a frozen weight is not cached, but each is used
// once a forward) and, in backward, the weight gradient cast back to fp32, plus the bias gradient reduction
// when there is a bias. A frozen weight has neither gradient.
void linear(ops::row_group& g, std::string_view name, std::string_view cast_name, double out, double in,
            const hf_shape& x, bool bias) {
  g.gemm(name, x.T, out, in, x.c, x.c, x.trains);
  const double cast = in * out * (4 + x.c);
  if (x.amp) g.add(cast_name, op_class::elementwise, cast, 1, x.trains ? cast : 0, x.trains ? 1 : 0);
  if (bias && x.trains) g.add("linear.bias_grad", op_class::elementwise, 0, 0, x.T * out * x.c, 1);
  // Autocast casts the bias too (linear and addmm are lower-precision ops: every floating argument is cast,
  // a leaf's cast cached for the forward; aten/src/ATen/autocast_mode.cpp, cached_cast), and its gradient
  // is cast back: a kernel each way, like the weight's.
  const double bias_cast = out * (4 + x.c);
  if (bias && x.amp) g.add(cast_name, op_class::elementwise, bias_cast, 1, x.trains ? bias_cast : 0, x.trains ? 1 : 0);
}

// peft's LoRA on `modules` linears of one layer, of `in_sum` input and `out_sum` output features in all:
// per module result + lora_B(lora_A(x)) * scaling (peft/tuners/lora/layer.py, Linear.forward), adapters in
// fp32. Input casts: to the adapters' fp32 when the input is 16-bit without autocast, to autocast's dtype
// from the fp32 input (twice, there and back, for a 16-bit input under autocast). The two GEMMs per module
// are batched as `modules` GEMMs of the average width; each trains, so backward has two of each. The rest:
// the scaling, the sum with the base output, its cast back.
void lora_adapters(ops::row_group& g, const hf_shape& x, double modules, double in_sum, double out_sum, double rank,
                   double in_16bit_sum) {
  if (modules == 0) return;
  const double a = x.amp ? x.c : x.adapter;  // the adapters' GEMM dtype
  const double fp32_in = in_sum - in_16bit_sum;
  const double casts = x.amp ? x.T * (fp32_in * (4 + x.c) + in_16bit_sum * 2 * (4 + x.c))
                             : (x.c == x.adapter ? 0 : x.T * in_sum * (x.c + x.adapter));
  const double cast_kernels = x.amp ? modules + (in_16bit_sum > 0 ? 1 : 0) : (x.c == x.adapter ? 0 : modules);
  g.gemm("lora.A", x.T, rank, in_sum / modules, a, a, true, op_class::gemm, modules);
  g.gemm("lora.B", x.T, out_sum / modules, rank, a, a, true, op_class::gemm, modules);
  // scaling (read, write), the sum (two reads, a write) and, when the sum is promoted, the cast back.
  const double tail = x.T * out_sum * (2 * a + 3 * a + (x.c != a ? a + x.c : 0));
  g.add("lora.elementwise", op_class::elementwise, casts + tail, cast_kernels + 3 * modules, casts + tail,
        cast_kernels + 3 * modules);
  // lora_dropout: native_dropout on the input in the adapters' dtype (read, write, a bool mask), one kernel
  // per module; backward scales the gradient by the mask (two reads, a write).
  if (x.lora_dropout)
    g.add("lora.dropout", op_class::elementwise, x.T * in_sum * (2 * x.adapter + 1), modules,
          x.T * in_sum * (2 * x.adapter + 1), modules);
}

// A residual add of a GEMM output to the stream: one kernel; in backward the stream's gradient is summed
// from its two consumers, and cast to the branch dtype when the stream is fp32.
void residual(ops::row_group& g, std::string_view name, const hf_shape& x) {
  g.add(name, op_class::elementwise, x.E * (2 * x.r + x.c), 1, 3 * x.E * x.r + (x.r != x.c ? x.E * (x.r + x.c) : 0),
        x.r != x.c ? 2 : 1);
}

void dropout(ops::row_group& g, std::string_view name, double elements, double bytes, bool on) {
  if (on) g.add(name, op_class::elementwise, elements * (2 * bytes + 1), 1, elements * (2 * bytes + 1), 1);
}

// The attention core by SDPA backend. flops: 2 T s (heads x head_dim + heads x v_head_dim) forward, as
// planner/time/flops.hpp counts it; flash-style kernels recompute the scores in backward.
void attention_core(ops::row_group& g, const hf_shape& x, sdpa_backend backend, bool gpt, bool drop) {
  const double flops = 2 * x.T * x.s * (x.qw + x.ow);
  if (backend == sdpa_backend::fused || backend == sdpa_backend::efficient) {
    // A sliding-window mask: repeat_kv copies k and v out to every head (backward sums them back), SDPA
    // makes the bool mask a bias (logical_not, where) and the kernels read it.
    double kvw = x.kvw, vw = x.vw, bias = 0;
    if (x.mask) {
      const double bss = x.batches / x.heads * x.s * x.s;
      bias = bss * x.c;
      if (x.kvw < x.qw)
        g.add("attention.repeat_kv", op_class::elementwise, 2 * (x.T * x.kvw + x.T * x.qw) * x.c, 2,
              2 * (x.T * x.kvw + x.T * x.qw) * x.c, 2);
      g.add("attention.mask_bias", op_class::elementwise, bss * (2 + 1 + x.c), 2, 0, 0);
      kvw = vw = x.qw;
    }
    // One kernel forward; backward a preprocessing kernel (dO . O), the main kernel and the dq conversion.
    const double io = x.T * (x.qw + kvw + vw + x.ow) * x.c;
    g.add("attention.sdpa", op_class::attention, io + bias, 1, 2.5 * io + bias + x.T * x.qw * 8, 3, flops, 3 * flops, true);
    // With the mask SDPA runs without is_causal (sdpa_attention_forward: is_causal only when the mask is
    // None), so the kernel computes every tile of the square, the masked ones too.
    g.out.ops.back().every_tile = x.mask;
    // transformers' sdpa_attention_forward returns attn_output.transpose(1, 2).contiguous(): one copy.
    g.add("attention.transpose", op_class::elementwise, 2 * x.E * x.c, 1, 2 * x.E * x.c, 1);
    return;
  }
  // Eager (and SDPA's math fallback): the scores [b, heads, s, s] are materialised.
  const double N = x.batches * x.s * x.s;
  const double probs = (!gpt || backend == sdpa_backend::math || x.amp) ? 4 : x.c;  // softmax output dtype
  if (!gpt || backend == sdpa_backend::math)  // repeat_kv: keys and values copied out to every query head
    if (x.kvw < x.qw) g.add("attention.repeat_kv", op_class::elementwise, 2 * (x.T * x.kvw + x.T * x.qw) * x.c, 2,
                            2 * (x.T * x.kvw + x.T * x.qw) * x.c, 2, 0, 0, true);
  g.gemm("attention.scores", x.s, x.s, x.d, x.c, x.c, true, op_class::attention, x.batches, true, true);
  // scale, causal mask, softmax, cast back to the value dtype, dropout: each a pass over the scores.
  double fwd = 2 * N * x.c + 2 * N * x.c + N * (x.c + probs);
  double bwd = 2 * N * x.c + 3 * N * probs;
  double fk = 3, bk = 2;
  if (probs != x.c) fwd += N * (probs + x.c), bwd += N * (probs + x.c), ++fk, ++bk;
  if (drop) fwd += N * (2 * x.c + 1), bwd += N * (2 * x.c + 1), ++fk, ++bk;
  g.add("attention.softmax", op_class::attention, fwd, fk, bwd, bk, 0, 0, true);
  g.gemm("attention.values", x.s, x.dv, x.s, x.c, x.c, true, op_class::attention, x.batches, true, true);
  g.add("attention.transpose", op_class::elementwise, 2 * x.E * x.c, 1, 2 * x.E * x.c, 1);
}

// gelu_new = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): pow, two scalar products, add, tanh, add,
// and two products; pow runs in fp32 under autocast, so everything after it is fp32 (20 element passes
// forward; backward two products' two kernels each, tanh, two scalar products, pow's two kernels and
// two sums of x's gradient: 10 kernels, 27 passes).
void gelu_new(ops::row_group& g, const hf_shape& x) {
  const double u = x.amp ? 4 : x.c;
  g.add("mlp.gelu_new", op_class::elementwise, 20 * x.F * u, 8, 27 * x.F * u, 10);
}

// SwiGLU's halves over `elements`: silu(gate), one kernel forward, silu_backward's one in backward; the
// product silu * up, one kernel forward, two (one per factor) in backward.
void silu(ops::row_group& g, std::string_view name, double elements, const hf_shape& x) {
  g.add(name, op_class::elementwise, 2 * elements * x.c, 1, 3 * elements * x.c, 1);
}
void product(ops::row_group& g, std::string_view name, double elements, const hf_shape& x) {
  g.add(name, op_class::elementwise, 3 * elements * x.c, 1, 6 * elements * x.c, 2);
}

// Qwen2-MoE's shared expert, a LlamaMLP over every token of width `width` (gate and up each cast the input).
void shared_expert_mlp(ops::row_group& g, const hf_shape& x, double width) {
  const double F = x.T * width;
  input_cast(g, "autocast.input", x.E, x, 2);
  g.add("moe.shared.grad_sum", op_class::elementwise, 0, 0, 3 * x.E * x.r, 1);
  linear(g, "moe.shared.gate_proj", "autocast.weight", width, x.h, x, false);
  linear(g, "moe.shared.up_proj", "autocast.weight", width, x.h, x, false);
  silu(g, "moe.shared.silu", F, x);
  product(g, "moe.shared.product", F, x);
  linear(g, "moe.shared.down_proj", "autocast.weight", x.h, width, x, false);
}

// transformers' sparse MoE block (MixtralSparseMoeBlock; Qwen2Moe/Qwen3Moe): the router linear, softmax in
// fp32, top-k, renormalisation, the one-hot expert mask; then a Python loop over the experts, each finding
// its rows (torch.where), gathering them, one fused gate_up GEMM and one down GEMM over its R/E rows on
// average (each weight cast by autocast at every use: slices are not cached), SwiGLU, the routing weight and
// index_add_ back into the output. Qwen2-MoE adds its shared expert and sigmoid gate.
void add_llama_moe(ops::row_group& g, const hf_shape& x, const model_spec& m) {
  const double E = static_cast<double>(m.experts), k = static_cast<double>(m.experts_per_token);
  const double R = k * x.T, rows = R / E, RH = R * x.h, RF = R * x.f;
  input_cast(g, "autocast.input", x.E, x, 1);  // the router's input
  linear(g, "moe.router", "autocast.weight", E, x.h, x, false);
  // softmax, topk, sum, div, cast; one_hot and permute of the [E, k, T] int64 mask.
  g.add("moe.routing", op_class::elementwise, x.T * E * (x.c + 8) + x.T * k * 36 + E * k * x.T * 16, 7,
        x.T * E * 12 + x.T * k * 32, 5);
  // Per expert: where (two kernels) over its [k, T] mask slice, the gather, the routing weight's index and
  // product, the cast back and index_add_; backward: index_add's gather, the product's two, the gather's
  // scatter-add. Autocast casts the gathered rows for the GEMM.
  g.add("moe.expert_loop", op_class::elementwise, E * k * x.T * 8 + RH * (3 * x.r + 3 * x.c) + R * 8, 7 * E,
        RH * (4 * x.r + 3 * x.c) + R * 8, 5 * E);
  if (x.amp) g.add("autocast.input", op_class::elementwise, RH * (4 + x.c), E, RH * (4 + x.c), E);
  g.gemm("moe.experts.gate_up", rows, 2 * x.f, x.h, x.c, x.c, true, op_class::gemm, E);
  g.add("moe.swiglu", op_class::elementwise, 5 * RF * x.c, 2 * E, 9 * RF * x.c, 3 * E);
  g.gemm("moe.experts.down", rows, x.h, x.f, x.c, x.c, true, op_class::gemm, E);
  if (x.amp) {
    const double weights = E * 3 * x.f * x.h * (4 + x.c);
    g.add("autocast.weight", op_class::elementwise, weights, 2 * E, weights, 2 * E);
  }
  if (m.shared_expert_ffn > 0) {
    shared_expert_mlp(g, x, static_cast<double>(m.shared_expert_ffn));
    if (m.shared_expert_gate) {
      linear(g, "moe.shared_gate", "autocast.weight", 1, x.h, x, false);
      g.add("moe.shared_scale", op_class::elementwise, x.T * 8 + 3 * x.E * x.c, 2, x.T * 8 + 5 * x.E * x.c, 3);
    } else {  // DeepSeek: the shared experts' output added to the routed experts'
      g.add("moe.shared_add", op_class::elementwise, 3 * x.E * x.c, 1, 0, 0);
    }
  }
}

// transformers' DeepseekV3Attention: q_a_proj, q_a_layernorm and q_b_proj (or q_proj); kv_a_proj_with_mqa,
// kv_a_layernorm over the latent, kv_b_proj; RoPE on the queries' rotary part and on the one shared key,
// which is expanded to every head; the queries and keys concatenated from their two parts.
void add_mla_projections(ops::row_group& g, const hf_shape& x, const model_spec& m) {
  const double qr = static_cast<double>(m.q_lora_rank), kvr = static_cast<double>(m.kv_lora_rank);
  const double rope = static_cast<double>(m.rope_head_dim);
  const double kv_up = x.heads * static_cast<double>(m.head_dim - m.rope_head_dim + m.v_dim());
  input_cast(g, "autocast.input", x.E, x, 2);  // q_a (or q) and kv_a each cast the fp32 norm output
  g.add("attention.grad_sum", op_class::elementwise, 0, 0, 3 * x.E * x.r, 1);  // two consumers' gradients
  hf_shape latent = x;  // the latents' RMSNorms: over 16-bit inputs, whatever the stream's dtype
  latent.r = x.c;
  if (m.q_lora_rank > 0) {
    linear(g, "attention.q_a_proj", "autocast.weight", qr, x.h, x, false);
    latent.E = x.T * qr;
    rms_norm(g, "norm.q_a_layernorm", latent);
    input_cast(g, "autocast.input", x.T * qr, x);
    linear(g, "attention.q_b_proj", "autocast.weight", x.qw, qr, x, false);
  } else {
    linear(g, "attention.q_proj", "autocast.weight", x.qw, x.h, x, false);
  }
  linear(g, "attention.kv_a_proj_with_mqa", "autocast.weight", kvr + rope, x.h, x, false);
  latent.E = x.T * kvr;
  rms_norm(g, "norm.kv_a_layernorm", latent);
  input_cast(g, "autocast.input", x.T * kvr, x);
  linear(g, "attention.kv_b_proj", "autocast.weight", kv_up, kvr, x, false);
  // Rotary on q's and the shared key's rotary parts (five kernels each, fp32 under autocast), then the
  // queries and keys concatenated for every head (two cat kernels; backward two slicing copies each).
  const double o = x.amp ? 4 : x.c, rot = x.T * (x.heads + 1) * rope, qk = x.T * (x.qw + x.kvw);
  g.add("attention.rotary", op_class::elementwise, rot * (5 * x.c + 5 * o), 10, rot * 8 * o, 12);
  g.add("attention.cat_heads", op_class::elementwise, 2 * qk * o, 2, 2 * qk * o, 4);
  if (x.amp) g.add("autocast.input", op_class::elementwise, qk * (4 + x.c), 2, qk * (4 + x.c), 2);
}

}  // namespace

// What a pass of the layer's kernels depends on.
struct hf_layer_context {
  hf_shape x;
  const model_spec& m;
  const run_config& run;
  sdpa_backend backend;
  bool dropout;      // the model's dropout above 0 (GPT-2's attention, residual and embedding dropout)
  bool adapters;     // peft's LoRA on this dense layer's linears (QLoRA, MoE and MLA adapters are not timed op by op)
  double mlp_width;  // GPT-2's MLP, or a dense Llama-family MLP (DeepSeek's first layers: not the experts')
};

namespace {

// peft's LoRA adapters on the linears one op wraps, each `{in, out, input_16bit}` features (the input already
// 16-bit under autocast: SwiGLU's product, the attention's output), when the op's module is targeted.
struct adapted_module {
  bool targeted;
  double in, out;
  bool input_16bit = false;
};
void adapters(ops::row_group& g, const hf_layer_context& c, std::initializer_list<adapted_module> modules) {
  if (!c.adapters) return;
  double count = 0, in = 0, out = 0, in16 = 0;
  for (const adapted_module& a : modules) {
    if (!a.targeted) continue;
    count += 1, in += a.in, out += a.out;
    if (a.input_16bit) in16 += a.in;
  }
  lora_adapters(g, c.x, count, in, out, static_cast<double>(c.run.lora_rank), in16);
}
bool targets(const hf_layer_context& c, unsigned bits) { return (c.run.lora_targets & bits) != 0; }

// ---- GPT-2's block (GPT2Block, GPT2Attention, GPT2MLP) -----------------------------------------------------

void gpt2_ln_1(ops::row_group& g, const hf_layer_context& c) { layer_norm(g, "norm.ln_1", c.x); }
void gpt2_c_attn(ops::row_group& g, const hf_layer_context& c) {
  const hf_shape& x = c.x;
  input_cast(g, "autocast.input", x.E, x);
  linear(g, "attention.c_attn", "autocast.weight", x.qw + 2 * x.kvw, x.h, x, true);
  adapters(g, c, {{targets(c, lora_q | lora_k | lora_v), x.h, x.qw + 2 * x.kvw}});
}
void gpt2_attention(ops::row_group& g, const hf_layer_context& c) { attention_core(g, c.x, c.backend, true, c.dropout); }
void gpt2_attn_c_proj(ops::row_group& g, const hf_layer_context& c) {
  const hf_shape& x = c.x;
  linear(g, "attention.c_proj", "autocast.weight", x.h, x.qw, x, true);
  adapters(g, c, {{targets(c, lora_o), x.ow, x.h, x.amp}});
}
void gpt2_dropout(ops::row_group& g, const hf_layer_context& c) { dropout(g, "dropout.resid", c.x.E, c.x.c, c.dropout); }
void residual_attention(ops::row_group& g, const hf_layer_context& c) { residual(g, "residual.attention", c.x); }
void gpt2_ln_2(ops::row_group& g, const hf_layer_context& c) { layer_norm(g, "norm.ln_2", c.x); }
void gpt2_c_fc(ops::row_group& g, const hf_layer_context& c) {
  const hf_shape& x = c.x;
  input_cast(g, "autocast.input", x.E, x);
  linear(g, "mlp.c_fc", "autocast.weight", x.f, x.h, x, true);
  adapters(g, c, {{targets(c, lora_mlp), x.h, x.f}});
}
void gpt2_gelu(ops::row_group& g, const hf_layer_context& c) { gelu_new(g, c.x); }
void gpt2_mlp_c_proj(ops::row_group& g, const hf_layer_context& c) {
  const hf_shape& x = c.x;
  input_cast(g, "autocast.input", x.F, x);  // the fp32 GELU output into the second GEMM
  linear(g, "mlp.c_proj", "autocast.weight", x.h, x.f, x, true);
  adapters(g, c, {{targets(c, lora_mlp), x.f, x.h}});  // on gelu_new's fp32 output
}
void residual_mlp(ops::row_group& g, const hf_layer_context& c) { residual(g, "residual.mlp", c.x); }

constexpr hf_layer_op gpt2_layer[] = {
    {"norm.ln_1", {norm_1_rows}, gpt2_ln_1},
    {"attention.c_attn", {qkv_projection_rows, qkv_adapter_rows}, gpt2_c_attn},
    {"attention", {attention_rows}, gpt2_attention},
    {"attention.c_proj", {out_projection_rows}, gpt2_attn_c_proj},
    {"dropout.resid", {attention_dropout_rows}, gpt2_dropout},
    {"residual.attention", {attention_residual_rows}, residual_attention},
    {"norm.ln_2", {norm_2_rows}, gpt2_ln_2},
    {"mlp.c_fc", {c_fc_rows, fc_adapter_rows, c_fc_output_rows}, gpt2_c_fc},
    {"mlp.gelu_new", {gelu_rows}, gpt2_gelu},
    {"mlp.c_proj", {c_proj_rows}, gpt2_mlp_c_proj},
    {"dropout.resid", {mlp_dropout_rows}, gpt2_dropout},
    {"residual.mlp", {}, residual_mlp},
    {"working sets", {layer_working_rows}},
};

// ---- The Llama family's decoder layer (LlamaDecoderLayer; Mistral, Qwen2, Phi-3, Gemma 2, Mixtral, Qwen-MoE,
// DeepSeek by their differences) ------------------------------------------------------------------------------

void llama_input_norm(ops::row_group& g, const hf_layer_context& c) { rms_norm(g, "norm.input_layernorm", c.x); }
void llama_qkv(ops::row_group& g, const hf_layer_context& c) {
  const hf_shape& x = c.x;
  if (c.m.is_mla()) return;  // attention.mla
  if (c.m.fused_projections) {
    // Phi3Attention: one qkv_proj, sliced into q, k and v (views).
    input_cast(g, "autocast.input", x.E, x);
    linear(g, "attention.qkv_proj", "autocast.weight", x.qw + 2 * x.kvw, x.h, x, c.m.qkv_bias);
    adapters(g, c, {{targets(c, lora_q | lora_k | lora_v), x.h, x.qw + 2 * x.kvw}});
    return;
  }
  input_cast(g, "autocast.input", x.E, x, 3);  // q, k and v each cast the fp32 norm output
  g.add("attention.grad_sum", op_class::elementwise, 0, 0, 2 * 3 * x.E * x.r, 2);  // three consumers' gradients
  linear(g, "attention.q_proj", "autocast.weight", x.qw, x.h, x, c.m.qkv_bias);
  linear(g, "attention.k_proj", "autocast.weight", x.kvw, x.h, x, c.m.qkv_bias);
  linear(g, "attention.v_proj", "autocast.weight", x.kvw, x.h, x, c.m.qkv_bias);
  adapters(g, c, {{targets(c, lora_q), x.h, x.qw}, {targets(c, lora_k), x.h, x.kvw}, {targets(c, lora_v), x.h, x.vw}});
}
// apply_rotary_pos_emb on q and k: q*cos, rotate_half (neg, cat), *sin, add: five kernels each; under autocast
// cos and sin are fp32, so the rotated q and k are fp32 and SDPA casts them back. Phi-3's rotates the rotary
// part and concatenates it with the rest (a copy each of q and k).
void llama_rotary(ops::row_group& g, const hf_layer_context& c) {
  const hf_shape& x = c.x;
  if (c.m.is_mla()) return;  // attention.mla
  const double o = x.amp ? 4 : x.c, qk = x.T * (x.qw + x.kvw);
  g.add("attention.rotary", op_class::elementwise, qk * (5 * x.c + 5 * o), 10, qk * 8 * o, 12);
  if (c.m.fused_projections) g.add("attention.rotary_cat", op_class::elementwise, 2 * qk * o, 2, 2 * qk * o, 2);
  if (x.amp) g.add("autocast.input", op_class::elementwise, qk * (4 + x.c), 2, qk * (4 + x.c), 2);
}
void llama_mla(ops::row_group& g, const hf_layer_context& c) {
  if (c.m.is_mla()) add_mla_projections(g, c.x, c.m);
}
void llama_attention(ops::row_group& g, const hf_layer_context& c) { attention_core(g, c.x, c.backend, false, false); }
void llama_o_proj(ops::row_group& g, const hf_layer_context& c) {
  const hf_shape& x = c.x;
  linear(g, "attention.o_proj", "autocast.weight", x.h, x.ow, x, false);
  adapters(g, c, {{targets(c, lora_o), x.ow, x.h, x.amp}});  // on SDPA's 16-bit output under autocast
}
// Gemma 2's sandwich norms (Gemma2DecoderLayer): after the attention and after the MLP, before each residual add.
void llama_post_attention_norm(ops::row_group& g, const hf_layer_context& c) {
  if (c.m.norms_per_layer == 4) rms_norm(g, "norm.post_attention", c.x);
}
void llama_post_attention_layernorm(ops::row_group& g, const hf_layer_context& c) {
  rms_norm(g, "norm.post_attention_layernorm", c.x);
}
// peft's adapters on gate and up (Phi-3: gate_up_proj), whose rows are lumped.
void llama_gate_up_adapters(ops::row_group& g, const hf_layer_context& c) {
  const double f = c.mlp_width;
  if (c.m.fused_projections) adapters(g, c, {{targets(c, lora_mlp), c.x.h, 2 * f}});
  else adapters(g, c, {{targets(c, lora_mlp), c.x.h, f}, {targets(c, lora_mlp), c.x.h, f}});
}
// LlamaMLP, down_proj(silu(gate_proj(x)) * up_proj(x)): Python evaluates silu(gate_proj(x)) before up_proj(x).
// Phi3MLP computes gate and up as one gate_up_proj and chunks its output: one cast, one GEMM.
void llama_gate_proj(ops::row_group& g, const hf_layer_context& c) {
  const hf_shape& x = c.x;
  input_cast(g, "autocast.input", x.E, x);
  if (c.m.fused_projections) {
    linear(g, "mlp.gate_up_proj", "autocast.weight", 2 * c.mlp_width, x.h, x, false);
    return;
  }
  g.add("mlp.grad_sum", op_class::elementwise, 0, 0, 3 * x.E * x.r, 1);  // gate's and up's input gradients
  linear(g, "mlp.gate_proj", "autocast.weight", c.mlp_width, x.h, x, false);
}
void llama_silu(ops::row_group& g, const hf_layer_context& c) { silu(g, "mlp.silu", c.x.T * c.mlp_width, c.x); }
void llama_up_proj(ops::row_group& g, const hf_layer_context& c) {
  if (c.m.fused_projections) return;  // gate_up_proj
  input_cast(g, "autocast.input", c.x.E, c.x);
  linear(g, "mlp.up_proj", "autocast.weight", c.mlp_width, c.x.h, c.x, false);
}
void llama_product(ops::row_group& g, const hf_layer_context& c) { product(g, "mlp.product", c.x.T * c.mlp_width, c.x); }
void llama_down_proj(ops::row_group& g, const hf_layer_context& c) {
  const hf_shape& x = c.x;
  linear(g, "mlp.down_proj", "autocast.weight", x.h, c.mlp_width, x, false);
  adapters(g, c, {{targets(c, lora_mlp), c.mlp_width, x.h, x.amp}});  // on the 16-bit product under autocast
}
void llama_post_feedforward_norm(ops::row_group& g, const hf_layer_context& c) {
  if (c.m.norms_per_layer == 4) rms_norm(g, "norm.post_feedforward", c.x);
}
void llama_moe(ops::row_group& g, const hf_layer_context& c) { add_llama_moe(g, c.x, c.m); }

constexpr auto dense = layer_part::dense_mlp;
constexpr hf_layer_op llama_layer[] = {
    {"norm.input_layernorm", {norm_1_rows}, llama_input_norm},
    {"attention.qkv", {qkv_projection_rows, qkv_adapter_rows}, llama_qkv},
    {"attention.rotary", {rotary_rows}, llama_rotary},
    {"attention.mla", {mla_projection_rows}, llama_mla},
    {"attention", {attention_rows}, llama_attention},
    {"attention.o_proj", {out_projection_rows}, llama_o_proj},
    {"norm.post_attention", {attention_post_norm_rows}, llama_post_attention_norm},
    {"residual.attention", {attention_residual_rows}, residual_attention},
    {"norm.post_attention_layernorm", {norm_2_rows}, llama_post_attention_layernorm},
    {"mlp.input", {mlp_input_rows}},  // autocast's casts of the MLP's input: the projections' kernels
    {"mlp.gate_up.adapters", {fc_adapter_rows}, llama_gate_up_adapters, dense},
    {"mlp.gate_proj", {gate_proj_rows}, llama_gate_proj, dense},
    {"mlp.silu", {silu_rows}, llama_silu, dense},
    {"mlp.up_proj", {up_proj_rows}, llama_up_proj, dense},
    {"mlp.product", {product_rows}, llama_product, dense},
    {"mlp.down_proj", {down_proj_rows}, llama_down_proj, dense},
    {"norm.post_feedforward", {mlp_post_norm_rows}, llama_post_feedforward_norm},
    {"residual.mlp", {}, residual_mlp},
    {"working sets", {layer_working_rows}},
    {"moe", {moe_rows}, llama_moe, layer_part::moe_mlp},
};

// A row's free point names a later row of its layer (hf_row::until): the first row, counted through a family's
// list, whose `until` or `or_until` names none, or -1. Rows written for the other family (`other`: the bit their
// condition names, gpt or llama) are neither checked nor found. Checked when this file compiles, so that a
// renamed or moved row cannot leave a free point that names nothing.
template <std::size_t N>
constexpr int unresolved_free_point(const hf_layer_op (&list)[N], std::uint64_t other) {
  // The i-th row through the list.
  auto row_at = [&](int i) -> const hf_row* {
    for (const hf_layer_op& op : list)
      for (const hf_row_table& table : op.rows) {
        if (i < static_cast<int>(table.size)) return table.first + i;
        i -= static_cast<int>(table.size);
      }
    return nullptr;
  };
  auto ours = [&](const hf_row* row) { return (row->when.all & other) == 0; };
  for (int i = 0; const hf_row* row = row_at(i); ++i)
    for (const std::string_view target : {row->until, row->or_until}) {
      if (!ours(row)) continue;
      if (target.empty() || target == "@output") continue;
      bool found = false;
      for (int j = i + 1; const hf_row* later = row_at(j); ++j)
        if (ours(later) && later->name == target) {
          found = true;
          break;
        }
      if (!found) return i;
    }
  return -1;
}
static_assert(unresolved_free_point(gpt2_layer, llama) == -1, "a row's free point names no later row of GPT-2's layer");
static_assert(unresolved_free_point(llama_layer, gpt) == -1, "a row's free point names no later row of a Llama layer");

}  // namespace

std::span<const hf_layer_op> hf_layer_ops(model_family family) {
  if (family == model_family::gpt) return gpt2_layer;
  return llama_layer;
}

void add_hf_step_ops(ops::row_group& layer, ops::row_group& dense_mlp, ops::row_group& moe_mlp, ops::row_group& head,
                     const model_spec& m, const run_config& run, const precision_layout& layout) {
  const bool full = run.finetune == finetune_kind::full;
  hf_shape x;
  x.T = static_cast<double>(run.seq) * static_cast<double>(run.micro_batch);
  x.s = static_cast<double>(run.seq);
  x.h = static_cast<double>(m.hidden);
  x.f = static_cast<double>(m.ffn);  // GPT-2's MLP, or an expert's (a dense Llama MLP: below)
  x.qw = static_cast<double>(m.q_width());
  x.kvw = static_cast<double>(m.kv_width());
  x.vw = static_cast<double>(m.v_width());
  x.ow = static_cast<double>(m.out_width());
  x.dv = static_cast<double>(m.v_dim());
  x.E = x.T * x.h;
  x.F = x.T * x.f;
  x.heads = static_cast<double>(m.heads);
  x.d = static_cast<double>(m.head_dim);
  x.batches = x.heads * static_cast<double>(run.micro_batch);
  x.c = size_of(layout.compute);
  // The model's dtype, a LoRA base's too (QLoRA's non-quantized weights are bf16).
  x.w = run.finetune == finetune_kind::qlora ? 2 : size_of(layout.weights);
  x.r = x.w;
  x.amp = layout.autocast_weight_cache && run.finetune != finetune_kind::qlora;
  x.trains = full;
  x.adapter = run.lora_fp32 ? 4 : x.w;
  x.lora_dropout = run.lora_dropout > 0;
  x.mask = hf_sliding_window_mask(m, run);
  const sdpa_backend backend = hf_sdpa_backend(m, run, layout);
  const bool gpt = m.family == model_family::gpt, drop = run.dropout > 0;

  // The layer's kernels, op by op from its family's list, group by group (every layer's, then the dense MLP
  // layers', then the Mixture-of-Experts layers').
  const hf_layer_context c{x, m, run, backend, drop, run.finetune == finetune_kind::lora && !m.is_moe() && !m.is_mla(),
                           gpt ? x.f : static_cast<double>(m.dense_mlp_width())};
  const bool has_dense = !m.is_moe() || m.dense_layers > 0;
  const std::span<const hf_layer_op> list = hf_layer_ops(m.family);
  for (const layer_part part : {layer_part::every_layer, layer_part::dense_mlp, layer_part::moe_mlp}) {
    if ((part == layer_part::dense_mlp && !has_dense) || (part == layer_part::moe_mlp && !m.is_moe())) continue;
    ops::row_group& g = part == layer_part::every_layer ? layer : part == layer_part::dense_mlp ? dense_mlp : moe_mlp;
    for (const hf_layer_op& op : list)
      if (op.part == part && op.kernels) op.kernels(g, c);
  }

  // Embedding: the gather (and GPT-2's position gather, add and dropout) forward; backward
  // embedding_dense_backward's sort-and-accumulate kernels, writing the whole [V, h] gradient.
  const double V = static_cast<double>(m.vocab);
  const double table = V * x.h * x.w;
  head.add("embedding", op_class::embedding, (gpt ? 3 : 1) * x.E * x.r + (drop ? x.E * (2 * x.r + 1) : 0), gpt ? 3 + drop : 1,
           x.E * x.r + 2 * table + (gpt ? x.E * x.r : 0), gpt ? 12 : 6);
  if (!gpt) head.add("attention.rotary_tables", op_class::elementwise, 0, 6, 0, 0);  // cos and sin, once a forward
  if (gpt) layer_norm(head, "norm.ln_f", x); else rms_norm(head, "norm.final", x);
  input_cast(head, "autocast.input", x.E, x);
  linear(head, "lm_head", "autocast.weight", V, x.h, x, false);
  if (m.tied_embeddings) head.add("embedding.tied_grad_sum", op_class::embedding, 0, 0, 3 * table, 1);
  // Gemma 2's final soft cap, cap * tanh(logits / cap): three kernels forward, tanh's and the two scalings'
  // backward.
  if (m.final_logit_softcap > 0)
    head.add("loss.softcap", op_class::elementwise, 6 * x.T * V * x.c, 3, 7 * x.T * V * x.c, 3);
  // ForCausalLMLoss: logits.float(), pad and shift the labels, cross_entropy = log_softmax + nll_loss.
  // Backward: nll_loss_backward (zero-fill and scatter), log_softmax_backward, and the cast back.
  const double TV = x.T * V;
  const double upcast = x.c != 4 ? TV * (x.c + 4) : 0;
  head.add("loss.cross_entropy", op_class::loss, upcast + 8 * TV, (x.c != 4 ? 1 : 0) + 4, 4 * TV + 12 * TV + upcast,
           (x.c != 4 ? 1 : 0) + 3);
}

}  // namespace trainplan
