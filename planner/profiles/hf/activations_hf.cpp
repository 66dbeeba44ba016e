#include "planner/profiles/hf/activations_hf.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>

#include "planner/profiles/hf/activations_hf_backward.hpp"
#include "planner/profiles/hf/hf_head_ops.hpp"
#include "planner/profiles/hf/hf_layer_ops.hpp"
#include "planner/profiles/hf/hf_traits.hpp"
#include "planner/util/checked_math.hpp"
#include "planner/run/lora.hpp"
#include "planner/run/moe.hpp"
#include "planner/run/packing.hpp"
#include "planner/run/selective_checkpoint.hpp"

namespace trainplan {

using namespace hf_rows;  // the rows' vocabulary (planner/profiles/hf/activations_hf_row_rules.hpp)

namespace {

// Every row's free point names a later row (activations_hf_row_rules.hpp, unresolved_free_point; the layer's
// rows are checked through each family's op list in hf_layer_ops.cpp): checked when this file compiles, so that
// a renamed row cannot leave a free point that names nothing.
static_assert(unresolved_free_point(gpt_backward_rows) == -1, "a backward row's free point names no later row");

// Where the layers' forward is not written op by op: what in the run has no op order in the rows (empty where
// every module's is). The rows spell out, op by op and in program order, the forward of GPT-2's block and of a
// dense Llama-family decoder layer with separate q, k, v and gate, up projections and two RMSNorms; each op's
// temporaries and free points follow the modules' code (transformers' modeling files, peft's lora.Linear,
// PyTorch's autocast and SDPA), as the recorded allocator histories (data/measurements/allocator-history-*)
// confirm. What the rows do not spell out keeps the coarse rows: the reason names it.
std::string_view coarse_forward_reason(const model_spec& m, const run_config& run, const precision_layout& layout,
                                       sdpa_backend backend) {
  const bool autocast = layout.autocast_weight_cache, fp32 = !autocast && layout.weights == dtype::fp32;
  const bool lora = run.finetune == finetune_kind::lora, qlora = run.finetune == finetune_kind::qlora;
  if (m.family == model_family::gpt) {
    // Under autocast every GPT-2 block is written, adapters (one c_attn module) and eager attention included.
    if (autocast) return {};
    if (lora || qlora) return "adapters on GPT-2 without autocast";
    if (backend != sdpa_backend::fused && backend != sdpa_backend::efficient) return "eager attention on GPT-2 without autocast";
    return {};
  }
  if (m.is_moe()) return "a Mixture-of-Experts MLP";
  if (m.is_mla()) return "latent attention";
  if (m.fused_projections) return "fused q, k, v and gate, up projections";
  if (m.norms_per_layer != 2) return "four norms a layer";
  if (m.attn_logit_softcap > 0) return "a soft cap on the attention scores";
  if (hf_sliding_window_mask(m, run)) return "a sliding-window mask";
  if (hf_packing_mask(run)) return "the block-diagonal mask of packed documents";
  if (qlora) return "QLoRA's quantized base";
  if (autocast) {
    if (lora) return "adapters under autocast";
    if (backend == sdpa_backend::eager) return "eager attention under autocast";
    return {};
  }
  if (fp32) {
    // An fp32 model with grouped heads runs SDPA's math path, which is written; the other fp32 kernels are not.
    if (lora) return "adapters on an fp32 model";
    if (backend != sdpa_backend::math) return "an fp32 model's attention kernel";
    return {};
  }
  // A 16-bit model: SDPA's kernels and eager attention; peft's adapters in fp32 on q, k, v and o.
  if (lora && !run.lora_fp32) return "adapters in the model's dtype";
  if (lora && (run.lora_targets & lora_mlp)) return "adapters on the MLP";
  if (lora && backend == sdpa_backend::eager) return "adapters with eager attention";
  return {};
}

}  // namespace

std::string_view hf_coarse_forward_reason(const model_spec& m, const run_config& run, const precision_layout& layout) {
  return coarse_forward_reason(m, run, layout, hf_sdpa_backend(m, run, layout));
}

namespace {

// Where the backward is not written op by op although the forward is: what in the run has none. It is written
// for GPT-2 fully fine-tuned on SDPA's fused kernel: the autograd engine's order of nodes and frees, as
// activations_hf_backward.hpp derives it, under autocast or in a 16-bit model, with or without dropout and
// checkpointing, for any accumulation, on any data-parallel GPUs whose gradients stay per parameter (below
// ZeRO-2).
std::string_view coarse_backward_reason(const model_spec& m, const run_config& run, const precision_layout& layout,
                                        sdpa_backend backend) {
  if (m.family != model_family::gpt) return "a Llama-family layer's backward";
  if (packs_documents(run)) return "packed documents' backward";
  if (run.finetune != finetune_kind::full) return "adapters' backward";
  if (run.loss != loss_kind::standard) return "a chunked or fused loss's backward";
  if (!layout.autocast_weight_cache && layout.weights == dtype::fp32) return "an fp32 model's backward";
  if (backend != sdpa_backend::fused) return "eager attention's backward";
  if (run.attention == attention_kind::flash_attention_2) return "the flash-attn package's backward";
  if (run.zero >= 2) return "gradients sharded by ZeRO-2 or 3";
  return {};
}

// The head's and the embedding's backward temporaries, which only the allocator replay makes (momentary), and
// the steps of the three backward events (planner/profiles/hf/activations_hf_backward.hpp): under autocast or in a
// 16-bit model, the steps' conditions tested against the run's bits (`holds`).
void add_gpt_backward_outside_layers(inventory_builder& inv, const model_spec& m, const run_config& run, dtype compute,
                                     dtype param, bool autocast, std::uint64_t holds, std::array<backward_program, 3>& backward) {
  using ek = event_kind;
  const std::uint64_t b = run.micro_batch, s = run.seq, h = m.hidden, V = m.vocab, tokens = b * s;
  auto moment = [&](std::string_view name, const tensor_shape& shape, dtype type, ek first, ek last) {
    inv.span(name, shape, type, tensor_category::activation_grads, first, last).momentary = true;
  };
  moment("head.d_logits", {tokens, V}, compute, ek::bwd_head, ek::bwd_head);
  // Under autocast its fp32 cast is the tied table's contribution; in a 16-bit model it is itself, held until
  // the embedding's backward adds the table's own.
  moment("head.d_weight", {V, h}, compute, ek::bwd_head, autocast ? ek::bwd_head : ek::bwd_embed);
  moment("head.d_input", {b, s, h}, compute, ek::bwd_head, ek::bwd_head);
  if (autocast) moment("head.d_input_fp32", {b, s, h}, param, ek::bwd_head, ek::bwd_head);
  // The residual stream's gradient, from ln_f's backward to the embedding's (the layers add theirs into it).
  moment("grad.residual", {b, s, h}, param, ek::bwd_head, ek::bwd_embed);
  if (run.dropout > 0) moment("embed.d_dropout", {b, s, h}, param, ek::bwd_embed, ek::bwd_embed);
  moment("embed.d_positions_sum", {1, s, h}, param, ek::bwd_embed, ek::bwd_embed);
  // embedding_dense_backward_cuda (aten/src/ATen/native/cuda/Embedding.cu) sorts more than 3072 indices and sums
  // them in partial segments of at most NROWS_PER_THREAD = 10 rows (EmbeddingBackwardKernel.cu): an fp32 buffer
  // of numel / 10 + min(numel, rows) segments of h (13.2 MiB for 4096 tokens of GPT-2's table).
  if (tokens > 3072)
    moment("embed.grad_partials", {tokens / 10 + std::min(tokens, V), h}, dtype::fp32, ek::bwd_embed, ek::bwd_embed);
  using namespace hf_rows;
  if (autocast) {
    backward[0] = {ek::bwd_head, gpt_head_backward, std::size(gpt_head_backward), holds};
    backward[1] = {ek::bwd_layer, gpt_layer_backward, std::size(gpt_layer_backward), holds};
    backward[2] = {ek::bwd_embed, gpt_embedding_backward, std::size(gpt_embedding_backward), holds};
  } else {
    backward[0] = {ek::bwd_head, gpt_16bit_head_backward, std::size(gpt_16bit_head_backward), holds};
    backward[1] = {ek::bwd_layer, gpt_16bit_layer_backward, std::size(gpt_16bit_layer_backward), holds};
    backward[2] = {ek::bwd_embed, gpt_16bit_embedding_backward, std::size(gpt_16bit_embedding_backward), holds};
  }
}

}  // namespace

hf_program_order add_hf_activations(inventory_builder& inv, const model_spec& m, const run_config& run, const precision_layout& layout,
                        const param_counts& counts, std::array<backward_program, 3>& backward,
                        const stack_traits& traits) {
  const std::uint64_t b = run.micro_batch, s = run.seq, h = m.hidden, a = m.heads, d = m.head_dim;
  // The dense MLP's width (DeepSeek's dense first layers have their own) and an expert's.
  const std::uint64_t f = m.dense_mlp_width(), f_expert = m.ffn;
  // Each layer under torch.utils.checkpoint: whole (full), or with torchtitan's per-op policy (selective, which
  // only a stack offering it lets through: planner/run/selective_checkpoint.hpp), which keeps the outputs of
  // the ops it saves (the rows marked mm_output and attention_output) and is full recomputation for the rest.
  const bool op_policy = run.recompute == recompute_mode::selective;
  const bool is_gpt = m.family == model_family::gpt, autocast = layout.autocast_weight_cache,
             drop = run.dropout > 0, checkpointed = run.recompute != recompute_mode::none;
  // The residual stream is in the model's dtype: the regime's weights, a LoRA base included (an fp32
  // model under autocast, bf16 under --precision bf16). QLoRA keeps its bf16 non-quantized weights.
  const bool full = run.finetune == finetune_kind::full;
  const dtype compute = layout.compute, param = run.finetune == finetune_kind::qlora ? dtype::bf16 : layout.weights;
  // LoRA on a dense model, modelled after peft; QLoRA and adapters on MoE or MLA layers keep the coarser
  // rule below (an adapted linear saves its input as a trained one does).
  const bool peft_lora = run.finetune == finetune_kind::lora && !m.is_moe() && !m.is_mla();
  const dtype adapter_type = run.lora_fp32 ? dtype::fp32 : layout.weights;
  const sdpa_backend backend = hf_sdpa_backend(m, run, layout, traits);
  const bool copies = backend == sdpa_backend::eager || backend == sdpa_backend::math;
  const dtype probs_type = (!is_gpt || backend == sdpa_backend::math) ? dtype::fp32 : param;

  std::uint64_t holds = (is_gpt ? gpt : llama) | (autocast ? amp : no_autocast) | (drop ? dropout : when_bits{}) | input_grad |
                        mm_output | attention_output;
  // torch.compile (hf_compile.hpp): what the partitioner saves and the fused kernels write (check_hf_compile
  // refuses the layers it is not written for).
  const bool compiled_layers = compiles_layers(run);
  if (compiled_layers) holds |= compiled;
  // Checkpointing a 16-bit Llama keeps its 16-bit layer input; the recomputed RMSNorm saves an fp32 copy of it
  // (compiled: the upcast is fused into the norm's kernels, never a tensor).
  if (!is_gpt && checkpointed && !autocast && param != dtype::fp32 && !compiled_layers) holds |= upcast_copy;
  holds |= m.is_moe() ? moe : dense_mlp;
  if (m.norms_per_layer == 4) holds |= post_norms;
  if (m.attn_logit_softcap > 0) holds |= attn_softcap;
  if (m.shared_expert_ffn > 0) holds |= shared_expert;
  if (m.shared_expert_ffn > 0 && m.shared_expert_gate) holds |= shared_gate;
  if (m.is_mla()) holds |= mla | (m.q_lora_rank > 0 ? mla_q_lora : when_bits{});
  holds |= m.fused_projections ? fused_proj : separate_proj;
  const std::uint64_t T = b * s, R = routed_rows(m, run), E = m.experts, k = m.experts_per_token;
  // The micro-batch's documents (--packing: each row's; TRL's padding-free collator flattens the rows into one).
  const std::uint64_t documents = checked_mul(b, packed_row_of(run).documents(), "packed documents");
  // The MLP's input is cast once per linear that reads it under autocast: gate and up (dense); the router,
  // and the shared expert's gate, up and sigmoid gate (experts; each expert casts its gathered rows).
  const std::uint64_t dense_mlp_casts = !autocast ? 1u : is_gpt || m.fused_projections ? 1u : 2u;
  const std::uint64_t moe_mlp_casts = !autocast ? 1u : 1u + (m.shared_expert_ffn > 0 ? 2u : 0u) + (holds & shared_gate ? 1u : 0u);
  // Set per kind of layer below: DeepSeek's dense first layers and its MoE layers differ.
  std::uint64_t mlp_input_casts = m.is_moe() ? moe_mlp_casts : dense_mlp_casts;
  std::uint64_t layer_matmul = counts.matmul_per_layer;
  // The norm output is cast for each projection that reads it: q, k and v; q_a (or q) and kv_a with MLA.
  const std::uint64_t qkv_casts = is_gpt || !autocast || m.fused_projections ? 1u : m.is_mla() ? 2u : 3u;
  if (!copies) holds |= sdpa_saves_qkv;
  if (copies) holds |= attn_copies | attn_probs;
  // A sequence no shorter than the sliding window: transformers builds the mask, and sdpa_attention_forward
  // then repeats k and v to every head (use_gqa_in_sdpa needs no mask).
  // Packed documents under SDPA (hf_packing_mask): the block-diagonal mask likewise.
  if (!copies && hf_sdpa_mask(m, run)) holds |= sdpa_mask;
  // A stack whose attention module expands k and v itself (torchtune's): SDPA sees as many key heads as query heads.
  if (!copies && traits.expands_kv_heads && m.kv_heads != m.heads) holds |= kv_expanded;
  // The values SDPA saves: a projection's own output (every attention but MLA), or with Phi-3's qkv_proj a
  // view of its whole output, unless repeat_kv copied them to every head (a mask with grouped heads);
  // eager attention saves its own contiguous copy either way.
  if (!m.is_mla()) {
    const bool repeated = (holds & (sdpa_mask | kv_expanded)) && m.kv_heads != m.heads;
    holds |= m.fused_projections && !repeated && !copies ? v_in_qkv : gqa_values;
  }
  if (copies && (probs_type != compute || drop)) holds |= probs_copy;
  holds |= copies && compute != dtype::fp32 && probs_type == dtype::fp32 ? scores_upcast : scores_same_dtype;
  if (backend == sdpa_backend::math) holds |= math_path;
  if (backend == sdpa_backend::fused) holds |= lse_fused;
  if (backend == sdpa_backend::fused && m.fused_projections && !m.is_mla()) holds |= sdpa_own_output;
  if (backend == sdpa_backend::efficient) holds |= lse_efficient;
  if (run.attention == attention_kind::flash_attention_2) {
    holds |= flash_attn_pkg;
    if (m.kv_heads != m.heads) holds |= flash_attn_gqa;
    if (packs_documents(run)) holds |= flash_attn_varlen;
  }
  // Full fine-tuning trains every weight; LoRA (peft) trains adapters on the targeted linears only.
  const unsigned qkv_targets = run.lora_targets & (lora_q | lora_k | lora_v);
  if (peft_lora) {
    holds |= peft;
    if (qkv_targets) holds |= peft_qkv;
    if (run.lora_targets & lora_o) holds |= peft_o;
    if (run.lora_targets & lora_mlp) holds |= peft_mlp;
    // peft keeps adapters in fp32 (autocast_adapter_dtype=True upcasts them from a 16-bit base) and casts
    // each adapted module's input to them: a copy per module unless the input is in their dtype already.
    // Under autocast lora_A then casts that to bf16 again, a copy per module in every regime.
    if (autocast || layout.weights != adapter_type) holds |= peft_copies;
    // lora_dropout above 0 (peft: nn.Dropout, else nn.Identity) gives every module a dropped-out copy of its own.
    if (run.lora_dropout > 0) holds |= peft_copies | peft_dropout;
  } else {
    if (full || qkv_targets) holds |= trains_qkv;
    if (full || (run.lora_targets & lora_mlp)) holds |= trains_mlp;
  }
  if (!peft_lora) holds |= norms_train;  // full fine-tuning (and, coarsely, QLoRA and MoE/MLA adapters)
  const std::string_view forward_gap = coarse_forward_reason(m, run, layout, backend);
  const bool in_program_order = forward_gap.empty();
  holds |= in_program_order ? fwd_program : coarse_forward;
  // A 16-bit model's RMSNorm upcasts to a copy of its own (an fp32 model's reads its input as it is).
  const bool norm_copy = !autocast && param != dtype::fp32;
  if (norm_copy && !compiled_layers) holds |= norm_upcasts;  // (compiled: fused into the norm's kernels)
  const bool own_input = !is_gpt && in_program_order && norm_copy && !checkpointed;  // beside RMSNorm's fp32 copy
  if (own_input) holds |= norm_copies_input;
  // The backward op by op where it is written (coarse_backward_reason).
  const std::string_view backward_gap = in_program_order ? coarse_backward_reason(m, run, layout, backend) : std::string_view();
  const bool backward_in_order = in_program_order && backward_gap.empty();
  if (backward_in_order) holds |= bwd_program;
  if (b * s > 3072) holds |= sorted_embedding_backward;
  const bool eager_in_order = in_program_order && backend == sdpa_backend::eager;
  const bool math_in_order = in_program_order && backend == sdpa_backend::math;
  if (eager_in_order) holds |= eager_ops;
  if (math_in_order) holds |= math_ops;
  // peft's modules one by one on a Llama op by op; lumped elsewhere (and on GPT-2, whose c_attn is one module).
  if (peft_lora && !is_gpt && in_program_order) {
    holds |= peft_per_module;
    if (run.lora_targets & lora_q) holds |= peft_q;
    if (run.lora_targets & lora_k) holds |= peft_k;
    if (run.lora_targets & lora_v) holds |= peft_v;
  }
  // The adapted modules reading the norms' outputs (GPT-2 fuses q, k and v into c_attn, Llama has separate
  // q, k, v and gate, up), and the copies of their input that lora_A saves: one per module, or the one
  // input they share when peft need not cast it (an fp32 model without autocast).
  const std::uint64_t rank = run.lora_rank;
  const bool one_qkv_module = is_gpt || m.fused_projections;  // c_attn, qkv_proj
  const std::uint64_t peft_qkv_modules = one_qkv_module ? 1u : static_cast<std::uint64_t>(__builtin_popcount(qkv_targets));
  const std::uint64_t peft_fc_modules = one_qkv_module ? 1u : 2u;  // c_fc, gate_up_proj | gate, up
  // One layer's adapter elements (lora_layer_tensors: each module's lora_A then lora_B, q, k and v's modules
  // first): the q, k, v modules' lora_A, and the rest.
  std::uint64_t adapters_qkv_a = 0, adapters_rest = 0;
  if (peft_lora) {
    const std::vector<std::uint64_t> tensors = lora_layer_tensors(m, rank, run.lora_targets, hf_traits);
    const std::size_t qkv_modules = lora_qkv_modules(m, run.lora_targets, hf_traits);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      std::uint64_t& sum = lora_is_qkv_a(i, qkv_modules) ? adapters_qkv_a : adapters_rest;
      sum = checked_add(sum, tensors[i], "LoRA adapters");
    }
  }
  const std::uint64_t peft_qkv_copies = holds & peft_copies ? peft_qkv_modules : 1u;
  const std::uint64_t peft_fc_copies = holds & peft_copies ? peft_fc_modules : 1u;
  // Autocast copies of full weights; FSDP/ZeRO-3 gathers weights in their compute dtype instead.
  if (full && run.zero < 3) holds |= trains_all;

  auto shape_of = [&](shape_rule r) -> tensor_shape {
    switch (r) {
      case shape_rule::bsh: return {b, s, h};
      case shape_rule::bsf: return {b, s, f};
      case shape_rule::bs2f: return {b, s, 2 * f};
      case shape_rule::bs_qkv: return {b, s, m.qkv_width()};
      case shape_rule::bs_q: return {b, a, s, d};
      case shape_rule::bs_kv: return {b, holds & sdpa_mask ? a : m.kv_heads, s, d};  // repeat_kv under a mask
      case shape_rule::bs_kv_sdpa: return {b, holds & (sdpa_mask | kv_expanded) ? a : m.kv_heads, s, d};
      case shape_rule::bs_v: return {b, a, s, m.v_dim()};
      case shape_rule::bs_qr: return {b, s, m.q_lora_rank};
      case shape_rule::bs_kvr: return {b, s, m.kv_lora_rank};
      case shape_rule::bs_kvb: return {b, s, a * (d - m.rope_head_dim + m.v_dim())};
      case shape_rule::bs_1: return {b, s, 1};
      case shape_rule::two_bs: return {2, b, s, 1};
      case shape_rule::bas: return {b, a, s};
      case shape_rule::bas32: return {b, a, (s + 31) / 32 * 32};
      case shape_rule::b1ss: return {b, 1, s, backend == sdpa_backend::efficient ? (s + 7) / 8 * 8 : s};
      case shape_rule::bass: return {b, a, s, s};
      case shape_rule::qkv_casts: return {qkv_casts, b, s, h};
      case shape_rule::fc_casts: return {mlp_input_casts, b, s, h};
      case shape_rule::matmul: return {layer_matmul};
      case shape_rule::matmul_after_qkv: {  // the layer's GEMM weights hold q, k and v's
        const std::uint64_t qkv_weights = checked_mul(h, m.qkv_width(), "q, k, v weights");
        return {layer_matmul > qkv_weights ? layer_matmul - qkv_weights : 0};
      }
      case shape_rule::lora_w_qkv_a: return {adapters_qkv_a};
      case shape_rule::lora_w_rest: return {adapters_rest};
      case shape_rule::w_qkv: return {h, m.qkv_width()};
      case shape_rule::w_o: return {m.out_width(), h};
      case shape_rule::w_fc: return {h, f};
      case shape_rule::w_proj: return {f, h};
      case shape_rule::w_q: return {h, a * d};
      case shape_rule::w_kv: return {h, m.kv_heads * d};
      case shape_rule::bs_q_half: return {b, a, s, d / 2};
      case shape_rule::bs_kv_half: return {b, holds & sdpa_mask ? a : m.kv_heads, s, d / 2};
      case shape_rule::te: return {T, E};
      case shape_rule::tk: return {T, k};
      case shape_rule::r_1: return {R};
      case shape_rule::r_h: return {R, h};
      case shape_rule::r_f: return {R, f_expert};
      case shape_rule::r_2f: return {R, 2 * f_expert};
      case shape_rule::ekt: return {E, k, T};
      case shape_rule::bs_fs: return {b, s, m.shared_expert_ffn};
      case shape_rule::peft_qkv_in: return {peft_qkv_copies, b, s, h};
      case shape_rule::peft_qkv_a: return {peft_qkv_modules, b, s, rank};
      case shape_rule::bs_o: return {b, s, m.out_width()};
      case shape_rule::peft_fc_in: return {peft_fc_copies, b, s, h};
      case shape_rule::peft_fc_a: return {peft_fc_modules, b, s, rank};
      case shape_rule::bs_r: return {b, s, rank};
      case shape_rule::bs_qw: return {b, s, m.q_width()};
      case shape_rule::bs_kvw: return {b, s, m.kv_width()};
      case shape_rule::ss: return {s, s};
      case shape_rule::bas_rows: return {b, a, s};
      case shape_rule::reduce_bsh: return {2, b, s, h};
      case shape_rule::reduce_bsf: return {2, b, s, f};
      case shape_rule::reduce_bs_qkv: return {2, b, s, m.qkv_width()};
      case shape_rule::sdpa_bwd: return {b, a, s, d + 1};
      // flash_api.cpp's mha_bwd: seqlen_q_rounded = round_multiple(seqlen_q, 128); head_size_rounded: a
      // multiple of 32 up to 192, else 256.
      case shape_rule::rng_state: return {2};
      // Varlen (packed documents): mha_varlen_bwd's dq_accum is [total_q + 128 n, a, head_size_rounded] and its
      // softmax_d [a, total_q + 128 n], n the micro-batch's documents (each sequence 128 rows apart: "at least
      // 128 apart", flash_api.cpp).
      case shape_rule::fa_dq_accum:
        if (holds & flash_attn_varlen) return {T + 128 * documents, a, d <= 192 ? (d + 31) / 32 * 32 : 256};
        return {b, (s + 127) / 128 * 128, a, d <= 192 ? (d + 31) / 32 * 32 : 256};
      case shape_rule::fa_softmax_d:
        if (holds & flash_attn_varlen) return {a, T + 128 * documents};
        return {b, a, (s + 127) / 128 * 128};
      case shape_rule::cu_seqlens: return {documents + 1};
    }
    return {};
  };
  auto type_of = [&](dtype_role r) {
    switch (r) {
      case dtype_role::compute: return compute;
      case dtype_role::param: return param;
      case dtype_role::fp32: return dtype::fp32;
      case dtype_role::probs: return probs_type;
      case dtype_role::norm_input: return is_gpt || checkpointed ? param : dtype::fp32;
      case dtype_role::mask: return dtype::u8;
      case dtype_role::index: return dtype::i64;
      case dtype_role::index32: return dtype::i32;
      case dtype_role::adapter_in: return autocast ? compute : adapter_type;
    }
    return compute;
  };

  const std::int64_t fwd0 = inv.fwd_layer0(), bwd0 = inv.bwd_layer0(), loss = inv.event(event_kind::loss);
  const event_interval forward_of_layer{fwd0, 1, fwd0, 1}, backward_of_layer{bwd0, -1, bwd0, -1};
  // LoRA without checkpointing: nothing before layer 0's first adapter needs a gradient (the embedding is
  // frozen, and enable_input_require_grads is what checkpointing needs, not called here).
  const bool layer0_without_input_grad = peft_lora && !checkpointed;
  const std::uint64_t L = m.layers;
  // Whether a row applies (checked in the loops, not in emit: most rows do not, and sweeps build millions
  // of inventories).
  auto applies = [&](const hf_row& row) { return row.when.applies(holds); };
  const bool program = (holds & fwd_program) != 0;
  // forward_moment rows waiting for the row that frees them (a layer's rows name later rows of the layer).
  struct waiting_moment {
    std::string_view until, or_until;
    std::size_t index;
  };
  std::array<waiting_moment, 24> waiting{};
  std::size_t waiting_count = 0;
  auto resolve_free_points = [&](const hf_row& row, std::size_t index, bool moment) {
    for (std::size_t i = 0; i < waiting_count;) {
      waiting_moment& w = waiting[i];
      const bool first = w.until == row.name;
      if (first || w.or_until == row.name) {
        inv.tensor(w.index).freed_after = static_cast<std::uint16_t>(index);
        // Freed by its first choice: done; by the fallback: the first choice, later in the layer, wins.
        if (first) {
          waiting[i] = waiting[--waiting_count];
          continue;
        }
      }
      ++i;
    }
    if (!moment || index >= tensor_spec::free_at_layer_output) return;
    if (row.until == "@output" || row.or_until == "@output") inv.tensor(index).freed_after = tensor_spec::free_at_layer_output;
    if (!row.until.empty() && waiting_count < waiting.size()) waiting[waiting_count++] = {row.until, row.or_until, index};
  };
  // Which parameter tensors a weight copy's allocations stand for: a layer's GEMM weights or adapters, or one
  // module's weight (one tensor).
  auto cast_scope = [](shape_rule r) {
    switch (r) {
      case shape_rule::matmul: return param_scope::layer_matmul;
      case shape_rule::matmul_after_qkv: return param_scope::layer_matmul_after_qkv;
      case shape_rule::w_qkv: return param_scope::layer_matmul_qkv;  // Llama's q, k, v: three tensors
      case shape_rule::lora_w_qkv_a: return param_scope::layer_adapters_qkv_a;
      case shape_rule::lora_w_rest: return param_scope::layer_adapters_rest;
      default: return param_scope::none;  // one module's weight: one tensor
    }
  };
  // torchtitan's per-op policy: the layer's mm outputs counted in program order (one table walk is one layer).
  std::uint64_t matmul_calls = 0;
  auto kept_by_policy = [&](const hf_row& row) {
    if (!op_policy) return false;
    if (row.when.all & attention_output) return true;
    return (row.when.all & mm_output) != 0 && op_policy_saves_matmul(++matmul_calls);
  };
  auto emit = [&](const hf_row& row) {
    bool forward_copy = false;  // a saved row's momentary forward copy (checkpointing, below)
    // An output the policy keeps: held from the layer's forward to its backward (the checkpoint's storage),
    // then handed to the recomputed forward in place of the op's rerun; never made again.
    if (kept_by_policy(row)) {
      inv.layer(row.name, shape_of(row.shape), type_of(row.type), true, false, tensor_category::activations);
      resolve_free_points(row, inv.count() - 1, false);
      return;
    }
    const bool from_layer1 = layer0_without_input_grad && (row.when.all & input_grad);
    // A weight's copy in layer 0 where no gradient needs it: made all the same, not saved. A frozen GEMM's
    // copy is freed once the GEMM has run; autocast's cached copy of a trained adapter when the forward ends.
    if (from_layer1 && (row.keep == keep_class::frozen_cast || row.keep == keep_class::autocast_cache)) {
      inv.set_layer_range(0, 1);
      const bool frozen = row.keep == keep_class::frozen_cast;
      tensor_spec& t = inv.layer_intervals(row.name, shape_of(row.shape), type_of(row.type), tensor_category::weights,
                                           {frozen ? forward_of_layer : event_interval{fwd0, 1, loss, 0}});
      t.role = tensor_role::frozen_weights;
      t.scope = cast_scope(row.shape);
      t.momentary = frozen;
      inv.all_layers();
    }
    // Op by op, a saved row's layer-0 tensor is still made, and freed where its variable dies (hf_row::until).
    if (from_layer1 && program && row.keep == keep_class::saved && !row.until.empty()) {
      inv.set_layer_range(0, 1);
      tensor_spec& t = inv.layer_intervals(row.name, shape_of(row.shape), type_of(row.type), tensor_category::activations,
                                           {forward_of_layer});
      t.momentary = true;
      resolve_free_points(row, inv.count() - 1, true);
      inv.all_layers();
    }
    if (from_layer1 && L == 1) return;
    if (from_layer1) inv.set_layer_range(1, L);
    const tensor_shape shape = shape_of(row.shape);
    const dtype type = type_of(row.type);
    const tensor_category cat = row.keep == keep_class::autocast_cache || row.keep == keep_class::frozen_cast
                                    ? tensor_category::weights
                                : row.keep == keep_class::backward_working || row.keep == keep_class::backward_moment ||
                                          row.keep == keep_class::backward_estimate
                                    ? tensor_category::activation_grads
                                    : tensor_category::activations;
    tensor_spec* made = nullptr;
    switch (row.keep) {
      case keep_class::layer_input: made = &inv.layer(row.name, shape, type, true, true, cat); break;
      case keep_class::layer_input_moment:
        // Layers 1 on: made as the previous layer's output, freed once this layer's output exists. Layer 0's is
        // the embedding's output, which the model holds longer (below).
        if (L == 1) return;
        inv.set_layer_range(1, L);
        made = &inv.layer_intervals(row.name, shape, type, cat, {{fwd0 - 1, 1, fwd0, 1}});
        made->freed_after = tensor_spec::free_at_layer_output;
        inv.all_layers();
        break;
      case keep_class::saved:
        // Non-reentrant checkpointing discards what the forward saves and rebuilds it in the layer's backward.
        made = checkpointed ? &inv.layer_intervals(row.name, shape, type, cat, {backward_of_layer})
                            : &inv.layer(row.name, shape, type, true, false, cat);
        // GPT-2's forward op by op under checkpointing: nothing is saved, so the forward makes the buffer and
        // frees it where its Python variable dies (hf_row::until), a momentary copy beside the saved one.
        if (checkpointed && program && !row.until.empty()) {
          made = &inv.layer_intervals(row.name, shape, type, cat, {forward_of_layer});
          made->momentary = true;
          forward_copy = true;
        }
        break;
      case keep_class::forward_working: made = &inv.layer_intervals(row.name, shape, type, cat, {forward_of_layer}); break;
      case keep_class::forward_moment:  // made again when a checkpointed layer's backward recomputes it
        made = checkpointed ? &inv.layer_intervals(row.name, shape, type, cat, {forward_of_layer, backward_of_layer})
                            : &inv.layer_intervals(row.name, shape, type, cat, {forward_of_layer});
        made->momentary = true;
        break;
      case keep_class::forward_estimate:
        made = &inv.layer_intervals(row.name, shape, type, cat, {forward_of_layer});
        made->replayed = false;
        break;
      case keep_class::backward_working: made = &inv.layer_intervals(row.name, shape, type, cat, {backward_of_layer}); break;
      case keep_class::backward_estimate:
        made = &inv.layer_intervals(row.name, shape, type, cat, {backward_of_layer});
        made->replayed = false;
        break;
      case keep_class::backward_moment:
        made = &inv.layer_intervals(row.name, shape, type, cat, {backward_of_layer});
        made->momentary = true;
        break;
      case keep_class::autocast_cache: {
        // Autocast caches each weight's cast until the autocast region (the whole forward, loss included)
        // ends; under checkpointing nothing else keeps it, and the recomputation casts it again.
        tensor_spec& t = checkpointed ? inv.layer_intervals(row.name, shape, type, cat, {{fwd0, 1, loss, 0}, backward_of_layer})
                                      : inv.layer(row.name, shape, type, true, false, cat);
        t.role = tensor_role::frozen_weights;
        t.scope = cast_scope(row.shape);
        break;
      }
      case keep_class::frozen_cast: {
        // Saved like an activation: from the layer's forward to its backward, or cast again when the
        // backward recomputes the layer.
        tensor_spec& t = checkpointed ? inv.layer_intervals(row.name, shape, type, cat, {backward_of_layer})
                                      : inv.layer(row.name, shape, type, true, false, cat);
        t.role = tensor_role::frozen_weights;
        t.scope = cast_scope(row.shape);
        break;
      }
    }
    // peft's per-module buffers: one allocation per adapted module (each module casts its own input copy and
    // writes its own lora_A output).
    const bool per_module = row.shape == shape_rule::peft_qkv_in || row.shape == shape_rule::peft_qkv_a ||
                            row.shape == shape_rule::peft_fc_in || row.shape == shape_rule::peft_fc_a;
    if (made && per_module) made->allocations = static_cast<std::uint16_t>(shape.dims[0]);
    if (made) resolve_free_points(row, inv.count() - 1, row.keep == keep_class::forward_moment || forward_copy);
    if (from_layer1) inv.all_layers();
  };
  // The layer's rows, op by op through its family's list (planner/profiles/hf/hf_layer_ops.cpp).
  const std::span<const hf_layer_op> ops = hf_layer_ops(m.family);
  auto each_row = [&](auto&& visit, auto&& wanted_op) {
    for (const hf_layer_op& op : ops)
      if (wanted_op(op))
        for (const hf_row_table& table : op.rows)
          for (const hf_row& row : table) visit(row);
  };
  auto moe_op = [](const hf_layer_op& op) { return op.part == layer_part::moe_mlp; };
  auto not_moe_op = [](const hf_layer_op& op) { return op.part != layer_part::moe_mlp; };
  if (m.dense_layers == 0) {
    each_row([&](const hf_row& row) { if (applies(row)) emit(row); }, not_moe_op);
    if (backward_in_order)
      for (const hf_row& row : gpt_backward_rows)
        if (applies(row)) emit(row);
    if (m.is_moe()) each_row([&](const hf_row& row) { if (applies(row)) emit(row); }, moe_op);
    // The policy counts every mm of the layer: each must have its output's row (check_hf_selective_checkpoint
    // lets through only the layers whose rows write all of them).
    if (op_policy && matmul_calls != dense_layer_matmuls(m).size())
      throw std::logic_error("torchtitan's per-op policy: a layer's rows do not write each matmul's output");
  } else {
    // DeepSeek-V3: the rows every layer has, then the dense first layers' MLP rows, then the MoE layers'.
    // The MLP's input casts and the autocast weight copies differ between the two kinds of layer.
    auto kind_specific = [](const hf_row& row) {
      return (row.when.all & dense_mlp) != 0 || row.shape == shape_rule::fc_casts || row.shape == shape_rule::matmul;
    };
    each_row([&](const hf_row& row) { if (!kind_specific(row) && applies(row)) emit(row); }, not_moe_op);
    inv.set_layer_range(0, m.dense_layers);
    mlp_input_casts = dense_mlp_casts, layer_matmul = counts.matmul_per_dense_layer;
    holds = (holds & ~moe) | dense_mlp;
    each_row([&](const hf_row& row) { if (kind_specific(row) && applies(row)) emit(row); }, not_moe_op);
    inv.set_layer_range(m.dense_layers, m.layers);
    mlp_input_casts = moe_mlp_casts, layer_matmul = counts.matmul_per_layer;
    holds = (holds & ~dense_mlp) | moe;
    each_row([&](const hf_row& row) { if (kind_specific(row) && applies(row)) emit(row); }, not_moe_op);
    each_row([&](const hf_row& row) { if (applies(row)) emit(row); }, moe_op);
    inv.all_layers();
  }

  // ---- around the layers: the embedding, final norm, head and loss (hf_head_ops.cpp) ------------------
  add_hf_head_buffers(inv, m, run, layout, {holds, program, own_input, layer0_without_input_grad, traits.model_upcasts_logits});
  if (backward_in_order) add_gpt_backward_outside_layers(inv, m, run, compute, param, autocast, holds, backward);
  return {in_program_order, forward_gap, backward_gap};
}

}  // namespace trainplan
