#pragma once
// LoRA adapters (Hu et al. 2021): each targeted linear layer W (out x in) gains B (out x r) and A (r x in),
// r * (in + out) trainable parameters, while W stays frozen. QLoRA (Dettmers et al. 2023) stores the
// frozen linear weights in 4-bit NF4 with double quantization.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "planner/run/stack_traits.hpp"
#include "planner/model/model_spec.hpp"

namespace trainplan {

// One adapted linear layer of a transformer layer: W is (out x in).
struct lora_module {
  std::uint64_t in = 0, out = 0;
};

// The linear layers one transformer layer's targets adapt, in the model's module order (attention q, k, v, o,
// then the MLP: the order peft creates them in). A stack that keeps a model's fused projections (Phi-3's
// qkv_proj: stack_traits::keeps_fused_projections) adapts each as one module.
std::vector<lora_module> lora_layer_modules(const model_spec& m, unsigned targets, const stack_traits& stack);

// The adapter tensors of one layer, each module's lora_A (r x in) then lora_B (out x r): PyTorch holds each
// as its own tensor, and so each gradient and optimizer state (the allocator replay allocates them so).
std::vector<std::uint64_t> lora_layer_tensors(const model_spec& m, std::uint64_t rank, unsigned targets,
                                              const stack_traits& stack);

// Trainable adapter parameters over all layers for the given targets (lora_target bits). A stack that keeps a
// model's fused projections (model_spec::fused_projections: Phi-3's qkv_proj and gate_up_proj; peft on the
// Hugging Face model) adapts each as one module; others keep the separate projections.
std::uint64_t lora_params(const model_spec& m, std::uint64_t rank, unsigned targets,
                          const stack_traits& stack);

// How many of those modules are the attention's q, k and v (GPT-2's and Phi-3's one fused module): the first
// ones of lora_layer_modules.
unsigned lora_qkv_modules(const model_spec& m, unsigned targets, const stack_traits& stack);

// Whether tensor `index` of lora_layer_tensors is the lora_A of one of the layer's first `qkv_modules` modules.
constexpr bool lora_is_qkv_a(std::size_t index, std::size_t qkv_modules) { return index % 2 == 0 && index / 2 < qkv_modules; }

// How many linear layers of one transformer layer the targets adapt (mlp: fc and proj, or gate, up, down).
unsigned lora_linears(const model_spec& m, unsigned targets, const stack_traits& stack);

// Bytes of n weights in NF4 with double quantization: 4 bits each, one 8-bit absmax per 64-weight block,
// one fp32 constant per 256 blocks (QLoRA Sec. 3: 4 + 8/64 + 32/(64*256) = 4.127 bits per weight).
std::uint64_t nf4_bytes(std::uint64_t n);

}  // namespace trainplan
