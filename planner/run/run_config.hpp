#pragma once
// How the model is trained: sequence, batch, precision, optimizer, recomputation, attention kernel.
#include <cstdint>
#include <string>
#include <string_view>

#include "planner/run/optimizer.hpp"
#include "planner/run/precision.hpp"
#include "planner/util/compute_capability.hpp"

namespace trainplan {

struct stack_profile;  // planner/profiles/profile.hpp: a training stack, which the layers below it never ask about

// none: every activation a layer's backward needs is kept from its forward.
// selective: the attention core (QK^T, softmax, dropout, attention over V) is recomputed in backward
//   (Korthikanti et al. 2022, Sec. 5): the 5as^2b term goes, 34sbh stays.
// full: only each layer's input is kept (2sbh); the layer's forward is rerun during its backward.
enum class recompute_mode { none, selective, full };

// eager: the s x s softmax is materialized (and saved). flash: tiled attention with online softmax
// (Dao et al. 2022) saves only the output and the fp32 log-sum-exp per row, recomputing in backward (under
// Hugging Face: attn_implementation="sdpa", PyTorch's scaled_dot_product_attention picking its kernel).
// flash_attention_2: the same algorithm from the flash-attn package, as transformers calls it
// (attn_implementation="flash_attention_2"): its own saved tensors and backward workspaces.
enum class attention_kind { eager, flash, flash_attention_2 };
// Whether the kernel is tiled (no s x s scores kept): every kind but eager.
constexpr bool attention_tiled(attention_kind a) { return a != attention_kind::eager; }

// How the loss over the vocabulary is computed:
// standard: the head's logits for every token, upcast to fp32 and cross-entropied at once (transformers'
//   ForCausalLMLoss).
// chunked: the head run over the sequence in chunks, each chunk's logits upcast and cross-entropied in turn
//   (torchtune's CEWithChunkedOutputLoss with the model's chunked output).
// fused_linear: the head's GEMM and the loss fused per chunk of tokens, the head's gradients computed in the
//   forward; no logits tensor kept (Liger's LigerFusedLinearCrossEntropy).
enum class loss_kind { standard, chunked, fused_linear };

// What torch.compile covers (planner/profiles/hf/hf_compile.hpp):
// none: eager.
// model: the whole model with its loss in one compiled program (torch.compile(model): the Trainer's torch_compile).
// layers: each decoder layer compiled apart, the embedding, final norm, head and loss eager (regional
//   compilation: accelerate's use_regional_compilation compiles the blocks of every nn.ModuleList).
// layers_and_loss: each decoder layer and the loss compiled apart, the head eager (torchtune's compile_model and
//   compile_loss; its model upcasts the logits to fp32 before a standard loss, stack_traits::model_upcasts_logits;
//   a chunked loss compiles compute_cross_entropy, the upcast inside it).
enum class compile_scope : std::uint8_t { none, model, layers, layers_and_loss };

// Where ZeRO-Offload / ZeRO-Infinity put model state (Ren et al. 2021; Rajbhandari et al. 2021).
enum class offload_mode { none, optimizer, params, both };
// full: every weight trains. lora: a frozen base (bf16; under peft the model's dtype), trainable low-rank adapters
// (Hu et al. 2021).
// qlora: frozen 4-bit NF4 base with double quantization, adapters as lora (Dettmers et al. 2023).
enum class finetune_kind { full, lora, qlora };

// Which linear layers carry LoRA adapters (bits).
enum lora_target : unsigned { lora_q = 1, lora_k = 2, lora_v = 4, lora_o = 8, lora_mlp = 16 };

std::string_view offload_name(offload_mode o);
offload_mode parse_offload(std::string_view text);      // throws input_error
std::string_view finetune_name(finetune_kind f);
finetune_kind parse_finetune(std::string_view text);    // throws input_error
unsigned parse_lora_targets(std::string_view text);     // "q,k,v,o[,mlp]"; throws input_error
std::string lora_targets_text(unsigned targets);

std::string_view recompute_name(recompute_mode r);
recompute_mode parse_recompute(std::string_view text);  // throws input_error
std::string_view attention_name(attention_kind a);
attention_kind parse_attention(std::string_view text);  // throws input_error
std::string_view loss_name(loss_kind l);
loss_kind parse_loss(std::string_view text);            // throws input_error
std::string_view compile_scope_name(compile_scope c);
compile_scope parse_compile_scope(std::string_view text);  // throws input_error

struct run_config {
  std::uint64_t seq = 0;
  std::uint64_t micro_batch = 1;
  std::uint64_t grad_accum = 1;
  precision_regime precision = precision_regime::bf16_mixed;
  grad_dtype_choice grad_dtype = grad_dtype_choice::automatic;
  optimizer_kind optimizer = optimizer_kind::adamw;
  recompute_mode recompute = recompute_mode::none;
  attention_kind attention = attention_kind::flash;
  // The GPU's compute capability (gpu_spec::capability), which decides the kernels a stack's libraries pick
  // (PyTorch's SDPA backend); evaluate_plan sets it from the GPU. {0, 0}: not known, taken as an H100's.
  compute_capability gpu_capability;
  loss_kind loss = loss_kind::standard;
  // loss_kind::chunked: the chunks the sequence is split into; 0: the source's default (torchtune's 8).
  std::uint64_t loss_chunks = 0;
  double dropout = 0.0;
  // Sequence packing (planner/run/packing.hpp): each row of seq tokens holds documents of this many tokens,
  // attention kept within each (TRL's packing with position_ids); 0: off, a row is one sequence.
  std::uint64_t packing_doc_tokens = 0;
  // torch.compile (Inductor's default mode) over this much of the program: the stacks that run transformers'
  // modules model what its partitioner saves and its fused kernels write (planner/profiles/hf/hf_compile.hpp).
  compile_scope compile = compile_scope::none;
  // The training stack (planner/profiles/registry.hpp). None named means this project's harness, so that a
  // run_config built in code means what the harness does (profile_of); the `plan` command names its default.
  const stack_profile* profile = nullptr;
  optimizer_impl_kind optimizer_impl = optimizer_impl_kind::foreach_impl;  // PyTorch's AdamW flavour
  // PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, segments that grow by mapping pages instead of new
  // cudaMalloc'd segments (planner/allocator/expandable_allocator.hpp). Only a stack whose allocator is PyTorch's offers it.
  bool expandable_segments = false;
  // The process already holds PyTorch's two cuBLAS workspaces, made by an earlier run in it (never freed:
  // aten/src/ATen/cuda/CublasHandlePool.cpp), so this run requests none and the replay makes none; they stay
  // segments of their own. Set for measurements taken one after another in one process (plan check
  // --one-process), not by the plan command.
  bool cublas_workspaces_held = false;

  // Beyond one GPU. gpus = data-parallel degree x tp x cp x pp.
  std::uint64_t gpus = 1;
  std::uint64_t tp = 1;                  // tensor-parallel degree (Megatron-LM)
  // Context-parallel degree: each sequence split over cp GPUs, seq / cp tokens each, attention's keys and values
  // passed round them as a ring (Megatron-Core with Transformer Engine's AttnFuncWithCPAndKVP2P). The weights are
  // replicated over cp as over data parallelism: gradients reduce, and the distributed optimizer shards, over dp x cp.
  std::uint64_t cp = 1;
  std::uint64_t pp = 1;                  // pipeline-parallel degree (1F1B schedule)
  std::uint64_t vpp = 1;                 // model chunks per pipeline GPU: above 1, Megatron's interleaved 1F1B
  bool sequence_parallel = false;        // with tp: norms and dropout split along the sequence too
  int zero = 0;                          // ZeRO stage 0..3 over the data-parallel group
  offload_mode offload = offload_mode::none;
  std::uint64_t host_memory_bytes = 0;   // 0: not checked

  // Mixture of Experts (planner/run/moe.hpp). Expert parallelism shards each layer's experts over ep of the
  // data-parallel GPUs (Megatron-Core: the expert-parallel group lies within the data-parallel group) and
  // exchanges routed tokens with all-to-all. capacity_factor 0 is dropless (every token reaches its top-k
  // experts); c >= 1 caps each expert at ceil(c * k * tokens / experts) rows, padded (Fedus et al. 2022).
  std::uint64_t ep = 1;
  double capacity_factor = 0.0;

  finetune_kind finetune = finetune_kind::full;
  std::uint64_t lora_rank = 16;
  unsigned lora_targets = lora_q | lora_k | lora_v | lora_o;
  // peft keeps adapters in fp32 (get_peft_model upcasts a 16-bit base's); false: in the
  // model's dtype, as when the model is cast after get_peft_model (--lora-dtype model).
  bool lora_fp32 = true;
  // peft's LoraConfig.lora_dropout (default 0: nn.Identity): above 0 each adapted linear drops out its own
  // copy of the input before lora_A (peft/tuners/lora/layer.py, LoraLayer.update_layer).
  double lora_dropout = 0.0;

  // 0 when tp x cp x pp is 0 or past 64 bits (validate_run refuses such a run; this must not divide by zero).
  std::uint64_t data_parallel() const {
    std::uint64_t model_parallel = 0;
    if (__builtin_mul_overflow(tp, pp, &model_parallel) || __builtin_mul_overflow(model_parallel, cp, &model_parallel) ||
        model_parallel == 0)
      return 0;
    return gpus / model_parallel;
  }
  // The GPUs that hold the same weights: data x context parallelism (Megatron-Core's data-parallel group "with
  // context parallel", over which gradients reduce and the distributed optimizer shards).
  std::uint64_t data_context_parallel() const { return data_parallel() * cp; }
  // The tokens of a sequence each GPU holds: seq / cp (planner/evaluate/plan.cpp refuses a sequence cp does not
  // split).
  std::uint64_t seq_per_gpu() const { return cp > 1 ? seq / cp : seq; }
  std::uint64_t global_batch() const { return micro_batch * grad_accum * data_parallel(); }  // sequences per step
  bool operator==(const run_config&) const = default;
};

// Whether the decoder layers run compiled, and whether the loss does (compile_scope).
constexpr bool compiles_layers(const run_config& r) { return r.compile != compile_scope::none; }
constexpr bool compiles_loss(const run_config& r) {
  return r.compile == compile_scope::model || r.compile == compile_scope::layers_and_loss;
}

// The GPUs' layout as given: at least one each, at most 2^20 GPUs, and a whole number of tp x cp x pp groups.
// Throws input_error naming the options (every command that takes them checks them before using them).
void check_parallel_layout(const run_config& run);

}  // namespace trainplan
