#pragma once
// What the PyTorch operations of a Hugging Face model cost, kernel by kernel: the building blocks of the hf
// profile's op lists (hf_layer_ops.cpp for a decoder layer, hf_head_ops.cpp for the embedding, head and loss).
// Each adds its forward and backward work, per pass, to a group of a step's operations. Internal to
// planner/profiles/hf/.
#include <string_view>

#include "planner/model/model_spec.hpp"
#include "planner/profiles/hf/hf_sdpa.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"
#include "planner/run/stack_traits.hpp"
#include "planner/time/step_ops_builder.hpp"

namespace trainplan::hf_kernels {

// One pass of the model in elements (T tokens, s sequence, h hidden, f an MLP's width, widths of q, k and v)
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
  bool kv_expanded = false;  // the stack's attention copies k and v out to every head (stack_traits::expands_kv_heads)
  double adapter = 4;  // LoRA adapters' dtype bytes (peft: fp32)
  bool lora_dropout = false;  // peft's lora_dropout above 0: each adapted module drops out its input
  bool flash_attn = false;    // the flash-attn package (attn_implementation="flash_attention_2"), not SDPA
  // The keys each query attends to (the square convention of planner/time/flops.hpp): s, or with packed
  // documents under the flash-attn package the row's sum over its documents of d^2, over s (varlen).
  double keys = 0;
  double documents = 0;  // the micro-batch's packed documents (flash_attn_varlen_func's sequences); 0: unpacked
};
hf_shape shape_of(const model_spec& m, const run_config& run, const precision_layout& layout, const stack_traits& traits);

void layer_norm(ops::row_group& g, std::string_view name, const hf_shape& x);
void rms_norm(ops::row_group& g, std::string_view name, const hf_shape& x);
void input_cast(ops::row_group& g, std::string_view name, double elements, const hf_shape& x, double count = 1);
// chunks: the GEMM run over the tokens in that many pieces, each reading the whole weight (torchtune's chunked
// output).
void linear(ops::row_group& g, std::string_view name, std::string_view cast_name, double out, double in,
            const hf_shape& x, bool bias, double chunks = 1);
void lora_adapters(ops::row_group& g, const hf_shape& x, double modules, double in_sum, double out_sum, double rank,
                   double in_16bit_sum);
void residual(ops::row_group& g, std::string_view name, const hf_shape& x);
void dropout(ops::row_group& g, std::string_view name, double elements, double bytes, bool on);
void attention_core(ops::row_group& g, const hf_shape& x, sdpa_backend backend, bool gpt, bool drop);
void gelu_new(ops::row_group& g, const hf_shape& x);
void silu(ops::row_group& g, std::string_view name, double elements, const hf_shape& x);
void product(ops::row_group& g, std::string_view name, double elements, const hf_shape& x);
// torch.compile (--compile; hf_compile.hpp): Inductor's fused kernels, each reading its inputs and writing its outputs
// once, and the backward's recomputation of what the partitioner did not save.
void rms_norm_compiled(ops::row_group& g, std::string_view name, const hf_shape& x);
void residual_compiled(ops::row_group& g, std::string_view name, const hf_shape& x, bool fused_into_norm);
void rotary_compiled(ops::row_group& g, const hf_shape& x);
void swiglu_compiled(ops::row_group& g, std::string_view name, double elements, const hf_shape& x);
void add_llama_moe(ops::row_group& g, const hf_shape& x, const model_spec& m);
void add_mla_projections(ops::row_group& g, const hf_shape& x, const model_spec& m);

}  // namespace trainplan::hf_kernels
