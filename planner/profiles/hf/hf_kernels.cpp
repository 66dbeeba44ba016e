// What PyTorch eager's kernels cost for a Hugging Face model (hf_kernels.hpp). PyTorch eager runs every
// Python operation of a Hugging Face model as its own kernel (or two, in backward). What each counts, per
// pass, follows the modeling code (transformers 5.17: modeling_gpt2.py, modeling_llama.py, loss_utils.py) and
// the autocast op lists (torch 2.11, autocast_mode.cpp), and agrees with the tensors autograd saved in
// ../shared/measurements (tests/data/measurements). Elementwise bytes are what each kernel reads and writes
// once; backward kernels are autograd's formulas (tools/autograd/derivatives.yaml): a product's backward is
// two products, a unary op's one kernel, and a tensor used twice gets its gradients summed by one more kernel.
#include "planner/profiles/hf/hf_kernels.hpp"

#include "planner/run/packing.hpp"

namespace trainplan::hf_kernels {

namespace {

double size_of(dtype t) { return static_cast<double>(dtype_bytes(t)); }

}  // namespace

hf_shape shape_of(const model_spec& m, const run_config& run, const precision_layout& layout, const stack_traits& traits) {
  hf_shape x;
  x.T = static_cast<double>(run.seq) * static_cast<double>(run.micro_batch);
  x.s = static_cast<double>(run.seq);
  x.h = static_cast<double>(m.hidden);
  x.f = static_cast<double>(m.ffn);  // GPT-2's MLP, or an expert's (a dense Llama MLP: hf_layer_context)
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
  x.trains = run.finetune == finetune_kind::full;
  x.adapter = run.lora_fp32 ? 4 : x.w;
  x.lora_dropout = run.lora_dropout > 0;
  x.mask = hf_sdpa_mask(m, run);  // a sliding window's, or packed documents' under SDPA
  x.kv_expanded = traits.expands_kv_heads && m.kv_heads != m.heads;
  x.flash_attn = run.attention == attention_kind::flash_attention_2;
  // Packed documents: flash_attn_varlen_func computes each document's causal tiles alone (cu_seqlens); SDPA,
  // handed the block-diagonal mask, every tile of the row's square (every_tile below).
  x.keys = x.s;
  if (x.flash_attn && packs_documents(run)) {
    const packed_row row = packed_row_of(run);
    x.keys = packed_attended_key_sum(row) / x.s;
    x.documents = static_cast<double>(row.documents()) * static_cast<double>(run.micro_batch);
  }
  return x;
}

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
void input_cast(ops::row_group& g, std::string_view name, double elements, const hf_shape& x, double count) {
  if (!x.amp) return;
  g.add(name, op_class::elementwise, count * elements * (4 + x.c), count, count * elements * (4 + x.c), count);
}

// A linear layer: the GEMM, autocast's copy of the weight (once per forward; its cache is cleared when
// the autocast region exits, so recomputation casts again; a frozen weight is not cached, but each is used
// once a forward) and, in backward, the weight gradient cast back to fp32, plus the bias gradient reduction
// when there is a bias. A frozen weight has neither gradient.
void linear(ops::row_group& g, std::string_view name, std::string_view cast_name, double out, double in,
            const hf_shape& x, bool bias, double chunks) {
  g.gemm(name, x.T / chunks, out, in, x.c, x.c, x.trains, op_class::gemm, chunks);
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
  const double flops = 2 * x.T * x.keys * (x.qw + x.ow);
  if (backend == sdpa_backend::fused || backend == sdpa_backend::efficient) {
    // A sliding-window mask: repeat_kv copies k and v out to every head (backward sums them back), SDPA
    // makes the bool mask a bias (logical_not, where) and the kernels read it. A stack whose attention expands
    // k and v itself (torchtune's expand and reshape) makes the same copies, without a mask.
    double kvw = x.kvw, vw = x.vw, bias = 0;
    if ((x.mask || x.kv_expanded) && x.kvw < x.qw) {
      g.add("attention.repeat_kv", op_class::elementwise, 2 * (x.T * x.kvw + x.T * x.qw) * x.c, 2,
            2 * (x.T * x.kvw + x.T * x.qw) * x.c, 2);
      kvw = vw = x.qw;
    }
    if (x.mask) {
      const double bss = x.batches / x.heads * x.s * x.s;
      bias = bss * x.c;
      g.add("attention.mask_bias", op_class::elementwise, bss * (2 + 1 + x.c), 2, 0, 0);
      kvw = vw = x.qw;
    }
    // One kernel forward; backward a preprocessing kernel (dO . O), the main kernel and the dq conversion.
    const double io = x.T * (x.qw + kvw + vw + x.ow) * x.c;
    g.add("attention.sdpa", op_class::attention, io + bias, 1, 2.5 * io + bias + x.T * x.qw * 8, 3, flops, 3 * flops, true);
    // With the mask SDPA runs without is_causal (sdpa_attention_forward: is_causal only when the mask is
    // None), so the kernel computes every tile of the square, the masked ones too.
    g.out.ops.back().every_tile = x.mask;
    if (x.flash_attn && x.documents > 0) {
      // transformers' modeling_flash_attention_utils._prepare_from_posids in each layer's forward:
      // prepare_fa_kwargs_from_position_ids (position_ids' min, == it, nonzero, the cast to int32, the total's
      // tensor, cat, diff and max, whose .item() waits for the device: not modelled), eight small kernels over
      // the b s position ids; and q, k (GPT-2: v too, slices of c_attn's output) made contiguous for the
      // [tokens, heads, d] views flash_attn_varlen_func takes: a copy each, saved in place of the originals.
      g.add("attention.cu_seqlens", op_class::elementwise, x.T * (8 + 8 + 1 + 8) + 3 * x.documents * 4, 8, 0, 0);
      const double copied = x.T * (x.qw + x.kvw + (gpt ? x.vw : 0));
      g.add("attention.varlen_copies", op_class::elementwise, 2 * copied * x.c, gpt ? 3 : 2, 0, 0);
    }
    if (x.flash_attn) {
      // transformers' flash_attention_forward hands flash-attn q, k, v as [b, s, heads, d] views and takes its
      // [b, s, heads, d] output as it is: no copy. With grouped heads mha_bwd computes dk and dv per query head
      // and sums each group (at::sum_out over the group dimension): two reductions.
      if (x.kvw < x.qw)
        g.add("attention.gqa_grad_sum", op_class::elementwise, 0, 0, 2 * (x.T * x.qw + x.T * x.kvw) * x.c, 2);
      return;
    }
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

// torch.compile's kernels (hf_compile.hpp). Inductor fuses the pointwise ops and cheap reductions between two
// GEMMs or attention calls into one kernel that reads its inputs and writes its outputs once
// (torch/_inductor/scheduler.py fuses nodes that share an iteration space or a reduction over it); the backward
// recomputes, in such kernels, what the min-cut partitioner did not save.
// RMSNorm: forward one reduction kernel reading the input, writing the output (saved for the GEMMs' weight
// gradients) and rsqrt [T] fp32. Backward: the input's gradient (read the output's gradient, the input and the
// residual stream's gradient it is summed into, write the sum); the weight's gradient (read the output's gradient
// and the input; a column reduction).
void rms_norm_compiled(ops::row_group& g, std::string_view name, const hf_shape& x) {
  const double fwd = x.E * (x.r + x.c) + 4 * x.T;
  const double bwd = x.E * (x.c + 3 * x.r) + x.E * (x.c + x.r);
  g.add(name, op_class::elementwise, fwd, 1, bwd, 2);
}
// A residual add: fused into the norm that follows it (that kernel also reads the branch's output and writes the
// sum, the residual stream), or at the layer's end a kernel of its own; its gradient is summed inside the norm's
// backward kernel (rms_norm_compiled reads it).
void residual_compiled(ops::row_group& g, std::string_view name, const hf_shape& x, bool fused_into_norm) {
  if (fused_into_norm) g.add(name, op_class::elementwise, x.E * (x.c + x.r), 0, 0, 0);
  else g.add(name, op_class::elementwise, x.E * (2 * x.r + x.c), 1, 0, 0);
}
// apply_rotary_pos_emb on q and on k: one kernel each, reading the projection's output (cos and sin, [s, d], are
// small) and writing the rotated tensor; backward the same for the gradients.
void rotary_compiled(ops::row_group& g, const hf_shape& x) {
  const double qk = x.T * (x.qw + x.kvw);
  g.add("attention.rotary", op_class::elementwise, 2 * qk * x.c, 2, 2 * qk * x.c, 2);
}
// SwiGLU, silu(gate) * up: forward one kernel reading gate and up, writing the product (saved for down_proj's
// weight gradient). Backward: one kernel reading the product's gradient, gate and up and writing gate's and up's
// gradients.
void swiglu_compiled(ops::row_group& g, std::string_view name, double elements, const hf_shape& x) {
  g.add(name, op_class::elementwise, 3 * elements * x.c, 1, 5 * elements * x.c, 1);
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

}  // namespace trainplan::hf_kernels
