#pragma once
// Which training stack runs the step. What a step keeps in memory depends on the program, not only on
// the model: PyTorch autocast keeps norms and the residual stream in fp32, Hugging Face's GPT-2 saves
// several [b,s,4h] tensors for its gelu_new, llm.c recomputes GELU, our harness reuses one set of
// backward buffers (DESIGN.md, "Frameworks"). Each profile is checked against measurements of that stack.
#include <cstdint>
#include <string_view>

#include "planner/run/precision.hpp"

namespace trainplan {

// hf: PyTorch eager + Hugging Face transformers (checked against torch 2.11, transformers 5.17 on an H100).
// llmc: llm.c (karpathy/llm.c, train_gpt2.cu) with its default GELU recompute and fused classifier.
// megatron: Megatron-LM with Transformer Engine, Korthikanti et al. 2022's per-layer accounting.
// trainplan: exactly what this project's harness allocates (validate/), byte for byte.
enum class framework_kind { hf, llmc, megatron, trainplan };

// PyTorch's AdamW implementations: foreach (the default on CUDA) works on lists of tensors and allocates
// a temporary copy of the second moment for its square root; fused is one kernel with no temporaries.
enum class optimizer_impl_kind { foreach_impl, fused };

std::string_view framework_name(framework_kind f);
framework_kind parse_framework(std::string_view text);  // throws input_error
std::string_view optimizer_impl_name(optimizer_impl_kind o);
optimizer_impl_kind parse_optimizer_impl(std::string_view text);  // throws input_error

// The precision a user of that stack gets without asking: Hugging Face's Trainer with bf16=True runs
// autocast over an fp32 model, but a LoRA base is loaded in bf16 (from_pretrained(torch_dtype=bfloat16),
// peft's documented setup; lora: whether LoRA adapters train); llm.c and our harness keep bf16 weights with
// an fp32 master copy; Megatron accumulates gradients in fp32 (main_grad).
precision_regime default_precision(framework_kind f, bool lora = false);

// How many rows a stack rounds its vocabulary tables up to a multiple of (planner/model/param_count.hpp
// vocab_rows): llm.c and this project's harness pad to 128, the others store the vocabulary as it is.
std::uint64_t vocab_pad_multiple(framework_kind f);

// One line for the report's "Assumptions": what the profile models.
std::string_view framework_assumption(framework_kind f);

}  // namespace trainplan
