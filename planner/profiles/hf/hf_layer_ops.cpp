// The hf profile's op lists (hf_layer_ops.hpp): GPT-2's block and the Llama family's decoder layer, each
// operation with the rows it makes (activations_hf_rows.hpp) and the kernels it launches (built from
// hf_kernels.hpp); and add_hf_step_ops, which walks them and the head's ops (hf_head_ops.hpp) into a step.
#include "planner/profiles/hf/hf_layer_ops.hpp"

#include "planner/profiles/hf/activations_hf_rows.hpp"
#include "planner/profiles/hf/hf_head_ops.hpp"
#include "planner/profiles/hf/hf_kernels.hpp"
#include "planner/profiles/hf/hf_sdpa.hpp"
#include "planner/run/selective_checkpoint.hpp"

namespace trainplan {

using namespace hf_rows;     // the rows' tables (activations_hf_rows.hpp)
using namespace hf_kernels;  // what each PyTorch op costs (hf_kernels.hpp)

// What a pass of the layer's kernels depends on.
struct hf_layer_context {
  hf_shape x;
  const model_spec& m;
  const run_config& run;
  sdpa_backend backend;
  bool dropout;      // the model's dropout above 0 (GPT-2's attention, residual and embedding dropout)
  bool adapters;     // peft's LoRA on this dense layer's linears (QLoRA, MoE and MLA adapters are not timed op by op)
  double mlp_width;  // GPT-2's MLP, or a dense Llama-family MLP (DeepSeek's first layers: not the experts')
  // --recompute selective: torchtitan's per-op policy (planner/run/selective_checkpoint.hpp), which keeps the
  // outputs of the layer's odd aten.mm calls; the calls counted so far in this pass of the layer.
  bool op_policy = false;
  mutable std::uint64_t matmul_calls = 0;
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

// A Llama-family linear without bias, one aten.mm (F.linear on a [b, s, in] input folds it into a 2-D mm): under
// torchtitan's per-op policy its forward GEMM is not rerun in the layer's backward when its call is odd.
void counted_linear(ops::row_group& g, const hf_layer_context& c, std::string_view name, double out, double in, bool bias) {
  g.output_saved = c.op_policy && op_policy_saves_matmul(++c.matmul_calls);
  linear(g, name, "autocast.weight", out, in, c.x, bias);
  g.output_saved = false;
}

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
void gpt2_dropout(ops::row_group& g, const hf_layer_context& c) { hf_kernels::dropout(g, "dropout.resid", c.x.E, c.x.c, c.dropout); }
// (Compiled, hf_compile.hpp: the attention's residual add is fused into the second norm's kernel; the MLP's is the
// layer graph's last kernel.)
void residual_attention(ops::row_group& g, const hf_layer_context& c) {
  if (compiles_layers(c.run)) residual_compiled(g, "residual.attention", c.x, true);
  else residual(g, "residual.attention", c.x);
}
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
void residual_mlp(ops::row_group& g, const hf_layer_context& c) {
  if (compiles_layers(c.run)) residual_compiled(g, "residual.mlp", c.x, false);
  else residual(g, "residual.mlp", c.x);
}

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

void llama_input_norm(ops::row_group& g, const hf_layer_context& c) {
  if (compiles_layers(c.run)) rms_norm_compiled(g, "norm.input_layernorm", c.x);
  else rms_norm(g, "norm.input_layernorm", c.x);
}
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
  // q, k and v each cast the fp32 norm output (compiled: the norm's kernel writes the cast, hf_compile.hpp)
  if (!compiles_layers(c.run)) input_cast(g, "autocast.input", x.E, x, 3);
  g.add("attention.grad_sum", op_class::elementwise, 0, 0, 2 * 3 * x.E * x.r, 2);  // three consumers' gradients
  counted_linear(g, c, "attention.q_proj", x.qw, x.h, c.m.qkv_bias);
  counted_linear(g, c, "attention.k_proj", x.kvw, x.h, c.m.qkv_bias);
  counted_linear(g, c, "attention.v_proj", x.kvw, x.h, c.m.qkv_bias);
  adapters(g, c, {{targets(c, lora_q), x.h, x.qw}, {targets(c, lora_k), x.h, x.kvw}, {targets(c, lora_v), x.h, x.vw}});
}
// apply_rotary_pos_emb on q and k: q*cos, rotate_half (neg, cat), *sin, add: five kernels each; under autocast
// cos and sin are fp32, so the rotated q and k are fp32 and SDPA casts them back. Phi-3's rotates the rotary
// part and concatenates it with the rest (a copy each of q and k).
void llama_rotary(ops::row_group& g, const hf_layer_context& c) {
  const hf_shape& x = c.x;
  if (c.m.is_mla()) return;  // attention.mla
  if (compiles_layers(c.run)) return rotary_compiled(g, x);
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
  counted_linear(g, c, "attention.o_proj", x.h, x.ow, false);
  adapters(g, c, {{targets(c, lora_o), x.ow, x.h, x.amp}});  // on SDPA's 16-bit output under autocast
}
// Gemma 2's sandwich norms (Gemma2DecoderLayer): after the attention and after the MLP, before each residual add.
void llama_post_attention_norm(ops::row_group& g, const hf_layer_context& c) {
  if (c.m.norms_per_layer == 4) rms_norm(g, "norm.post_attention", c.x);
}
void llama_post_attention_layernorm(ops::row_group& g, const hf_layer_context& c) {
  if (compiles_layers(c.run)) rms_norm_compiled(g, "norm.post_attention_layernorm", c.x);
  else rms_norm(g, "norm.post_attention_layernorm", c.x);
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
  if (!compiles_layers(c.run)) input_cast(g, "autocast.input", x.E, x);
  if (c.m.fused_projections) {
    linear(g, "mlp.gate_up_proj", "autocast.weight", 2 * c.mlp_width, x.h, x, false);
    return;
  }
  g.add("mlp.grad_sum", op_class::elementwise, 0, 0, 3 * x.E * x.r, 1);  // gate's and up's input gradients
  counted_linear(g, c, "mlp.gate_proj", c.mlp_width, x.h, false);
}
// (Compiled: silu and the product are one kernel, mlp.product.)
void llama_silu(ops::row_group& g, const hf_layer_context& c) {
  if (!compiles_layers(c.run)) silu(g, "mlp.silu", c.x.T * c.mlp_width, c.x);
}
void llama_up_proj(ops::row_group& g, const hf_layer_context& c) {
  if (c.m.fused_projections) return;  // gate_up_proj
  if (!compiles_layers(c.run)) input_cast(g, "autocast.input", c.x.E, c.x);
  counted_linear(g, c, "mlp.up_proj", c.mlp_width, c.x.h, false);
}
void llama_product(ops::row_group& g, const hf_layer_context& c) {
  if (compiles_layers(c.run)) swiglu_compiled(g, "mlp.product", c.x.T * c.mlp_width, c.x);
  else product(g, "mlp.product", c.x.T * c.mlp_width, c.x);
}
void llama_down_proj(ops::row_group& g, const hf_layer_context& c) {
  const hf_shape& x = c.x;
  counted_linear(g, c, "mlp.down_proj", x.h, c.mlp_width, false);
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
                     const model_spec& m, const run_config& run, const precision_layout& layout, const stack_traits& traits) {
  const hf_shape x = shape_of(m, run, layout, traits);
  const sdpa_backend backend = hf_sdpa_backend(m, run, layout, traits);
  const bool gpt = m.family == model_family::gpt, drop = run.dropout > 0;

  // The layer's kernels, op by op from its family's list, group by group (every layer's, then the dense MLP
  // layers', then the Mixture-of-Experts layers').
  // (selective reaches the hf ops only through a stack offering torchtitan's per-op policy: hf refuses it)
  const hf_layer_context c{x, m, run, backend, drop, run.finetune == finetune_kind::lora && !m.is_moe() && !m.is_mla(),
                           gpt ? x.f : static_cast<double>(m.dense_mlp_width()),
                           run.recompute == recompute_mode::selective};
  const bool has_dense = !m.is_moe() || m.dense_layers > 0;
  const std::span<const hf_layer_op> list = hf_layer_ops(m.family);
  // (The parts walk one layer's ops in program order, the attention's before the MLP's: the matmul calls count on.)
  for (const layer_part part : {layer_part::every_layer, layer_part::dense_mlp, layer_part::moe_mlp}) {
    if ((part == layer_part::dense_mlp && !has_dense) || (part == layer_part::moe_mlp && !m.is_moe())) continue;
    ops::row_group& g = part == layer_part::every_layer ? layer : part == layer_part::dense_mlp ? dense_mlp : moe_mlp;
    for (const hf_layer_op& op : list)
      if (op.part == part && op.kernels) op.kernels(g, c);
  }

  add_hf_head_kernels(head, m, run, layout, traits);
}

}  // namespace trainplan
