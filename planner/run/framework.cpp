#include "planner/run/framework.hpp"

#include <fmt/format.h>

#include "planner/util/input_error.hpp"

namespace trainplan {

std::string_view framework_name(framework_kind f) {
  switch (f) {
    case framework_kind::hf: return "hf";
    case framework_kind::llmc: return "llmc";
    case framework_kind::megatron: return "megatron";
    case framework_kind::trainplan: return "trainplan";
  }
  return "?";
}

framework_kind parse_framework(std::string_view text) {
  for (framework_kind f : {framework_kind::hf, framework_kind::llmc, framework_kind::megatron, framework_kind::trainplan})
    if (framework_name(f) == text) return f;
  throw input_error(fmt::format("--framework: unknown framework '{}' (known: hf, llmc, megatron, trainplan)", text));
}

std::string_view optimizer_impl_name(optimizer_impl_kind o) {
  return o == optimizer_impl_kind::fused ? "fused" : "foreach";
}

optimizer_impl_kind parse_optimizer_impl(std::string_view text) {
  if (text == "foreach") return optimizer_impl_kind::foreach_impl;
  if (text == "fused") return optimizer_impl_kind::fused;
  throw input_error(fmt::format("--optimizer-impl: unknown implementation '{}' (known: foreach, fused)", text));
}

precision_regime default_precision(framework_kind f, bool lora) {
  switch (f) {
    case framework_kind::hf: return lora ? precision_regime::bf16 : precision_regime::amp_bf16;
    case framework_kind::megatron: return precision_regime::megatron_bf16;
    case framework_kind::llmc:
    case framework_kind::trainplan: return precision_regime::bf16_mixed;
  }
  return precision_regime::bf16_mixed;
}

std::string_view framework_assumption(framework_kind f) {
  switch (f) {
    case framework_kind::hf:
      return "framework hf: PyTorch eager + Hugging Face transformers (profile checked against torch 2.11.0, "
             "transformers 5.17.0 on an H100): every tensor autograd saves, by op (autocast keeps norms, softmax, pow "
             "and the loss in fp32; gelu_new's Python ops; RMSNorm's fp32 upcast; SwiGLU; SDPA's backend as PyTorch "
             "picks it), the loss on fp32 logits with log_softmax saved, gradients appearing layer by layer in "
             "backward, the training loop's logits freed before optimizer.step(), foreach AdamW's temporary, and "
             "PyTorch's two cuBLAS workspaces (forward and autograd threads)";
    case framework_kind::llmc:
      return "framework llmc: llm.c's buffers (train_gpt2.cu): one activation block for all layers with GELU "
             "recomputed, the fused classifier writing gradients into the logits, bf16 parameters and gradients, "
             "fp32 master weights and AdamW state";
    case framework_kind::megatron:
      return "framework megatron: Megatron-LM + Transformer Engine per-layer activations as Korthikanti et al. 2022 "
             "count them (34sbh + 5as^2b with dropout, 2sbh under full recomputation)";
    case framework_kind::trainplan:
      return "framework trainplan: exactly the buffers this project's harness allocates (plan validate checks them "
             "byte for byte); activation gradients use a fixed set of backward buffers reused by every layer (as "
             "llm.c); the vocabulary tables and the logits padded to a multiple of 128 rows (llm.c's Vp), the "
             "fused classifier writing the logits' gradient over them";
  }
  return "";
}

std::uint64_t vocab_pad_multiple(framework_kind f) {
  return f == framework_kind::trainplan || f == framework_kind::llmc ? 128 : 1;
}

}  // namespace trainplan
