// The hf profile's operations around the decoder layers (hf_head_ops.hpp), each one function that adds its
// buffers (when a pass builds the inventory) and its kernels (when a pass lists the step's work). Sources:
// transformers 5.17's GPT2Model/GPT2LMHeadModel and LlamaModel/LlamaForCausalLM forwards, masking_utils and
// loss_utils (ForCausalLMLoss); PyTorch's autocast (torch 2.11, autocast_mode.cpp) and
// embedding_dense_backward (aten/src/ATen/native/cuda/Embedding.cu). The losses that never build the whole
// logits: torchtune's chunked output with CEWithChunkedOutputLoss (torchtune/modules/transformer.py,
// chunked_output; torchtune/modules/loss/ce_chunked_output_loss.py; its recipes' `del logits` before backward)
// and Liger's fused linear cross-entropy (liger_kernel/ops/fused_linear_cross_entropy.py).
#include "planner/profiles/hf/hf_head_ops.hpp"

#include "planner/profiles/hf/activations_hf_row_rules.hpp"
#include "planner/profiles/hf/hf_kernels.hpp"
#include "planner/profiles/hf/hf_loss_chunks.hpp"
#include "planner/profiles/hf/hf_sdpa.hpp"
#include "planner/run/packing.hpp"

namespace trainplan {
namespace {

using ek = event_kind;

// One pass over the head's operations: for their buffers (inv set) or for their kernels (g set).
struct head_pass {
  const model_spec& m;
  const run_config& run;
  const precision_layout& layout;
  inventory_builder* inv = nullptr;
  hf_head_layout head;
  ops::row_group* g = nullptr;
  hf_kernels::hf_shape x{};

  // The run, as the buffers see it.
  std::uint64_t b = run.micro_batch, s = run.seq, h = m.hidden, d = m.head_dim, V = m.vocab;
  bool is_gpt = m.family == model_family::gpt, autocast = layout.autocast_weight_cache, drop = run.dropout > 0,
       checkpointed = run.recompute != recompute_mode::none,  // full, or torchtitan's per-op policy (selective)
       full = run.finetune == finetune_kind::full;
  // The residual stream is in the model's dtype (QLoRA keeps its bf16 non-quantized weights).
  dtype compute = layout.compute, param = run.finetune == finetune_kind::qlora ? dtype::bf16 : layout.weights;
  bool peft_lora = run.finetune == finetune_kind::lora && !m.is_moe() && !m.is_mla();
  bool gpt_program = head.program && is_gpt;
  // The loss: chunked (torchtune) runs the head chunk by chunk; fused_linear (Liger) runs it inside the loss.
  bool chunked = run.loss == loss_kind::chunked, fused = run.loss == loss_kind::fused_linear;
  // A model that upcasts its whole logits to fp32 itself (stack_traits::model_upcasts_logits, torchtune's
  // TransformerDecoder: self.output(h).float(), which its chunked output does not do): the loss, eager or compiled
  // apart, reads fp32 logits.
  bool eager_upcast = head.model_upcasts_logits && run.loss == loss_kind::standard;
  hf_loss_chunking chunking = hf_loss_chunks(m, run);
  std::int64_t last_layer = static_cast<std::int64_t>(m.layers) - 1;

  // Buffers one operation makes and a later one frees (their indices in the inventory; 0: none).
  std::size_t embed_outputs[2] = {0, 0}, model_streams[2] = {0, 0}, final_norm_out = 0;

  // A buffer only the allocator replay makes, freed after `freed_after` (an index, or a tensor_spec marker).
  std::size_t moment(std::string_view name, const tensor_shape& shape, dtype type, ek first, ek last,
                     std::uint16_t freed_after) {
    tensor_spec& t = inv->span(name, shape, type, tensor_category::activations, first, last);
    t.momentary = true;
    t.freed_after = freed_after;
    return inv->count() - 1;
  }
  void free_after_latest(std::size_t index) { inv->tensor(index).freed_after = static_cast<std::uint16_t>(inv->count() - 1); }
};

// The batch, the embedding, and what the model builds before layer 0: the masks and the rotary tables.
// Kernels: the gather (and GPT-2's position gather, add and dropout) forward; backward embedding_dense_backward's
// sort-and-accumulate kernels, writing the whole [V, h] gradient.
void embedding(head_pass& p) {
  if (p.g) {
    const hf_kernels::hf_shape& x = p.x;
    const double table = static_cast<double>(p.V) * x.h * x.w;
    p.g->add("embedding", op_class::embedding, (p.is_gpt ? 3 : 1) * x.E * x.r + (p.drop ? x.E * (2 * x.r + 1) : 0),
             p.is_gpt ? 3 + p.drop : 1, x.E * x.r + 2 * table + (p.is_gpt ? x.E * x.r : 0), p.is_gpt ? 12 : 6);
    if (!p.is_gpt) p.g->add("attention.rotary_tables", op_class::elementwise, 0, 6, 0, 0);  // cos and sin, once a forward
  }
  if (!p.inv) return;
  inventory_builder& inv = *p.inv;
  const std::uint64_t b = p.b, s = p.s, h = p.h;
  inv.span("batch.input_ids", {b, s}, dtype::i64, tensor_category::activations, ek::fwd_embed, ek::bwd_embed);
  inv.span("batch.labels", {b, s}, dtype::i64, tensor_category::activations, ek::fwd_embed, ek::bwd_embed);
  // Packed documents (--packing): the collator's position_ids, restarting at each document, [b, s] int64 (TRL's
  // padding-free collator: one row of b s); otherwise GPT-2's own arange, [1, s].
  if (packs_documents(p.run))
    inv.span("batch.position_ids", {b, s}, dtype::i64, tensor_category::activations, ek::fwd_embed, ek::bwd_embed);
  else if (p.is_gpt)
    inv.span("batch.position_ids", {1, s}, dtype::i64, tensor_category::activations, ek::fwd_embed, ek::bwd_embed);
  // (Dropout on the frozen embedding's output saves its mask only when a gradient flows back to it.)
  if (p.is_gpt && p.drop && !p.head.layer0_without_input_grad)
    inv.span("embed.dropout_mask", {b, s, h}, dtype::u8, tensor_category::activations, ek::fwd_embed, ek::bwd_embed);
  // GPT-2's forward op by op (as the layers' rows): momentary buffers only the allocator replay makes.
  // GPT2Model.forward holds inputs_embeds and position_embeds until it returns, after ln_f; their sum lives
  // until the dropout's output (layer 0's input) exists, and so does an unsaved dropout mask. Layer 0's input,
  // when no layer saves it (LoRA without checkpointing), lives until the layer returns.
  if (p.gpt_program) {
    p.embed_outputs[0] = p.moment("embed.tokens_out", {b, s, h}, p.param, ek::fwd_embed, ek::fwd_head, tensor_spec::free_at_next_kept);
    p.embed_outputs[1] = p.moment("embed.positions_out", {1, s, h}, p.param, ek::fwd_embed, ek::fwd_head, tensor_spec::free_at_next_kept);
    if (p.drop) p.moment("embed.sum", {b, s, h}, p.param, ek::fwd_embed, ek::fwd_embed, tensor_spec::free_at_layer_output);
    if (p.drop && p.head.layer0_without_input_grad)
      p.moment("embed.dropout_mask_unsaved", {b, s, h}, dtype::u8, ek::fwd_embed, ek::fwd_embed, tensor_spec::free_at_layer_output);
    if (p.head.layer0_without_input_grad)
      p.moment("embed.out", {b, s, h}, p.param, ek::fwd_embed, ek::fwd_layer, tensor_spec::free_at_layer_output);
  }
  const bool checkpointed = p.checkpointed;
  // The sliding-window mask: bool, [1, 1, s, s] expanded over the batch (masking_utils.sdpa_mask), built once
  // per forward. Checkpointing keeps it as an argument of every layer's recomputation, to the last one.
  // Packed documents under SDPA (hf_packing_mask): sdpa_mask's bool block-diagonal causal mask differs row by
  // row, [b, 1, s, s] (masking_utils.find_packed_sequence_indices, packed_sequence_mask_function); Gemma 2's
  // full and sliding layers each have theirs.
  if ((p.head.holds & hf_rows::sdpa_mask) && hf_packing_mask(p.run))
    inv.span("mask.packed", {p.m.sliding_window_global_every > 0 ? 2 * b : b, 1, s, s}, dtype::u8,
             tensor_category::activations, ek::fwd_embed, checkpointed ? ek::bwd_embed : ek::fwd_head);
  else if (p.head.holds & hf_rows::sdpa_mask)
    inv.span("mask.sliding_window", {1, 1, s, s}, dtype::u8, tensor_category::activations, ek::fwd_embed,
             checkpointed ? ek::bwd_embed : ek::fwd_head);
  // Eager attention adds a float mask to the scores: transformers 5.x's masking_utils.eager_mask turns
  // sdpa_mask's bool [1, 1, s, s] (expanded over the batch) into 0 / finfo.min with torch.where, whose output
  // is the broadcast [b, 1, s, s] in the embeddings' dtype (fp32 under autocast). create_causal_mask builds
  // it once per forward for the Llama family (with Mistral's window folded in), Gemma 2 one for its full and
  // one for its sliding layers, and GPT-2 too (its recorded history: a 16 MiB fp32 [4, 1, 1024, 1024] block made
  // before layer 0 and kept through the forward; adding it promotes the bf16 scores to fp32); kept like the
  // sliding-window mask above.
  if (hf_sdpa_backend(p.m, p.run, p.layout) == sdpa_backend::eager)
    inv.span("mask.eager", {p.m.sliding_window_global_every > 0 ? 2 * b : b, 1, s, s}, p.param,
             tensor_category::activations, ek::fwd_embed, checkpointed ? ek::bwd_embed : ek::fwd_head);
  if (!p.is_gpt)  // rotary cos and sin, computed once per forward and read by every layer
    inv.span("rope.cos_sin", {2, s, p.m.is_mla() ? p.m.rope_head_dim : p.d}, p.param, tensor_category::activations,
             ek::fwd_embed, ek::bwd_embed);
  // A 16-bit Llama op by op, not checkpointed (a bf16 Llama's history): layer 0's input (the embedding's output,
  // which LlamaModel.forward holds as inputs_embeds) and the last layer's output live until the final norm's
  // output exists, and the norm saves an fp32 copy of its own, made in the head.
  if (p.head.own_input) {
    // (Compiled layers, hf_compile.hpp: layer 0's graph saves this tensor, its `ln1.in` row, until its backward.)
    if (!compiles_layers(p.run)) {
      inv.span("embed.out", {b, s, h}, p.param, tensor_category::activations, ek::fwd_embed, ek::fwd_head);
      p.model_streams[0] = inv.count() - 1;
    }
    inv.span("final_norm.input", {b, s, h}, p.param, tensor_category::activations, ek::fwd_layer, ek::fwd_head, p.last_layer);
    p.model_streams[1] = inv.count() - 1;
  }
}

// The final norm: GPT-2's ln_f (LayerNorm), a Llama's norm (RMSNorm).
void final_norm(head_pass& p) {
  if (p.g) {
    if (p.is_gpt) hf_kernels::layer_norm(*p.g, "norm.ln_f", p.x);
    else hf_kernels::rms_norm(*p.g, "norm.final", p.x);
  }
  if (!p.inv) return;
  inventory_builder& inv = *p.inv;
  const std::uint64_t b = p.b, s = p.s, h = p.h;
  const bool own_input = p.head.own_input, program = p.head.program;
  inv.span("final_norm.in", {b, s, h}, p.is_gpt ? p.param : dtype::fp32, tensor_category::activations,
           own_input ? ek::fwd_head : ek::fwd_layer, ek::bwd_head, own_input ? 0 : p.last_layer);
  // The final norm's fp32 output: GPT2LMHeadModel.forward (LlamaForCausalLM.forward) holds it until the loss has
  // read the logits. LayerNorm writes it before its statistics, RMSNorm after pow, rsqrt and the normed tensor.
  // (Without autocast ln_f's output is the head's saved input.)
  if (p.gpt_program && p.autocast)
    p.final_norm_out = p.moment("final_norm.out", {b, s, h}, p.param, ek::fwd_head, ek::loss, tensor_spec::free_at_next_kept);
  if (p.is_gpt) {
    inv.span("final_norm.stats", {2, b, s, 1}, dtype::fp32, tensor_category::activations, ek::fwd_head, ek::bwd_head);
    if (p.gpt_program)
      for (std::size_t i : p.embed_outputs) p.free_after_latest(i);
    return;
  }
  const std::size_t pow =
      program ? p.moment("final_norm.pow", {b, s, h}, dtype::fp32, ek::fwd_head, ek::fwd_head, tensor_spec::free_at_next_kept) : 0;
  inv.span("final_norm.rsqrt", {b, s, 1}, dtype::fp32, tensor_category::activations, ek::fwd_head, ek::bwd_head);
  if (program) p.free_after_latest(pow);
  // (A 16-bit model: x * rsqrt an fp32 temporary, freed once the output exists, which is lm_head's input.)
  const std::size_t x_rsqrt =
      own_input ? p.moment("final_norm.x_rsqrt", {b, s, h}, dtype::fp32, ek::fwd_head, ek::fwd_head, tensor_spec::free_at_next_kept)
                : 0;
  if (p.head.holds & hf_rows::norms_train)
    inv.span("final_norm.normed", {b, s, h}, p.param, tensor_category::activations, ek::fwd_head, ek::bwd_head);
  else if (own_input)  // a frozen norm's weight multiply saves no normalised tensor (LoRA on a bf16 TinyLlama's history)
    p.moment("final_norm.normed", {b, s, h}, p.param, ek::fwd_head, ek::fwd_head, tensor_spec::free_at_next_kept);
  const bool norm_copy = !p.autocast && p.param != dtype::fp32;
  if (program && !own_input && (p.autocast || norm_copy))
    p.final_norm_out = p.moment("final_norm.out", {b, s, h}, p.param, ek::fwd_head, ek::loss, tensor_spec::free_at_next_kept);
  if (own_input) {
    // The output is lm_head's saved input, or (a frozen head) held by LlamaForCausalLM.forward until the loss.
    // (Liger's fused loss saves no input: LlamaForCausalLM.forward holds the output until the loss returns.)
    if (p.full && !p.fused) inv.span("lm_head.in", {b, s, h}, p.compute, tensor_category::activations, ek::fwd_head, ek::bwd_head);
    else p.final_norm_out = p.moment("final_norm.out", {b, s, h}, p.param, ek::fwd_head, ek::loss, tensor_spec::free_at_next_kept);
    for (std::size_t i : {x_rsqrt, p.model_streams[0], p.model_streams[1]})
      if (i != 0) p.free_after_latest(i);
  }
}

// The head, lm_head: autocast's casts of its input and weight, the GEMM, and (tied embeddings) the table's
// two gradient contributions summed.
void lm_head(head_pass& p) {
  if (p.fused) return;  // Liger's loss runs the head's GEMMs itself (loss_fused_linear)
  if (p.g) {
    const hf_kernels::hf_shape& x = p.x;
    hf_kernels::input_cast(*p.g, "autocast.input", x.E, x);
    // torchtune's chunked output: one GEMM per chunk of the sequence (self.output(chunk) for each chunk).
    hf_kernels::linear(*p.g, "lm_head", "autocast.weight", static_cast<double>(p.V), x.h, x, false,
                       p.chunked ? static_cast<double>(p.chunking.chunks) : 1);
    if (p.eager_upcast) {  // .float() forward, and its backward casting the fp32 gradient back
      const double TV = x.T * static_cast<double>(p.V);
      p.g->add("lm_head.upcast", op_class::elementwise, TV * (x.c + 4), 1, TV * (4 + x.c), 1);
    }
    const double table = static_cast<double>(p.V) * x.h * x.w;
    if (p.m.tied_embeddings) p.g->add("embedding.tied_grad_sum", op_class::embedding, 0, 0, 3 * table, 1);
  }
  if (!p.inv) return;
  inventory_builder& inv = *p.inv;
  const std::uint64_t b = p.b, s = p.s, h = p.h, V = p.V;
  // The head's bf16 copy: cached (a trained weight) or cast anew (a frozen one), kept for its backward. Autocast
  // casts a linear's arguments right to left (bias, weight, input: the order GCC evaluates them in), so the
  // weight's copy comes before the input's.
  if (p.autocast && (p.full || p.peft_lora) && p.run.zero < 3)
    inv.span("lm_head.autocast.weight", {V, h}, p.compute, tensor_category::weights, ek::fwd_head, ek::bwd_head).role =
        tensor_role::frozen_weights;
  if (p.full && !p.head.own_input)
    inv.span("lm_head.in", {b, s, h}, p.compute, tensor_category::activations, ek::fwd_head, ek::bwd_head);
  // A frozen head's GEMM reads a bf16 cast of ln_f's output that it does not save.
  const std::size_t head_input_cast =
      p.gpt_program && !p.full
          ? p.moment("lm_head.in_cast", {b, s, h}, p.compute, ek::fwd_head, ek::fwd_head, tensor_spec::free_at_next_kept)
          : 0;
  // The logits the model returns: the training loop holds them (outputs.logits) until it drops the outputs
  // after backward, before optimizer.step().
  if (p.eager_upcast) {
    // The head's 16-bit output lives only until .float() has copied it; the fp32 logits are the model's output,
    // which the recipe deletes after the loss ("free logits otherwise it peaks backward memory"): eagerly nothing
    // saves them (log_softmax saves its own output), but a compiled loss's graph saves its input until the loss's
    // backward.
    inv.span("logits", {b, s, V}, p.compute, tensor_category::logits, ek::fwd_head, ek::fwd_head);
    inv.span("logits.fp32", {b, s, V}, dtype::fp32, tensor_category::logits, ek::fwd_head,
             compiles_loss(p.run) ? ek::bwd_head : ek::loss);
  } else if (!p.chunked) {
    inv.span("logits", {b, s, V}, p.compute, tensor_category::logits, ek::fwd_head, ek::bwd_embed);
  } else {
    // torchtune's chunked output: a list of [b, s_i, V] logits, one per chunk of the sequence, which the recipe
    // deletes once the loss is computed ("free logits otherwise it peaks backward memory"): nothing saves them
    // (the fp32 upcast's backward saves nothing, log_softmax saves its own output).
    // (Compiled, loss_compiled below: each chunk's graph saves its chunk, which then lives until the head's backward.)
    for (std::uint64_t i = 0; i < p.chunking.chunks; ++i)
      inv.span("logits.chunk", {chunked_loss_rows(p.run, p.chunking.chunks, i), V}, p.compute, tensor_category::logits,
               ek::fwd_head, compiles_loss(p.run) ? ek::bwd_head : ek::loss);
  }
  if (head_input_cast) p.free_after_latest(head_input_cast);
}

// Gemma 2's final soft cap, cap * tanh(logits / cap): three kernels forward, tanh's and the two scalings'
// backward. tanh saves its output, as large as the logits (256,000 wide); the capped logits are what the loop
// holds, so the raw ones are gone.
void logit_softcap(head_pass& p) {
  if (p.m.final_logit_softcap <= 0 || p.fused) return;  // (Liger's kernel caps each chunk's logits itself)
  if (p.g) {
    const double V = static_cast<double>(p.V);
    p.g->add("loss.softcap", op_class::elementwise, 6 * p.x.T * V * p.x.c, 3, 7 * p.x.T * V * p.x.c, 3);
  }
  if (p.inv)
    p.inv->span("logits.softcap_tanh", {p.b, p.s, p.V}, p.compute, tensor_category::logits, ek::fwd_head, ek::bwd_head);
}

// ForCausalLMLoss: logits.float() (a copy unless they are fp32 already), pad and shift the labels,
// cross_entropy = log_softmax, whose fp32 output is saved, then nll_loss. Backward: nll_loss_backward
// (zero-fill and scatter) and log_softmax_backward, whose gradients coexist, and the cast back.
// (A model that returns fp32 logits, eager_upcast: torchtune's recipe shifts the labels, not the logits, and
// cross_entropy reads the model's fp32 logits as they are; the upcast and its backward are lm_head's.)
void loss_standard(head_pass& p) {
  if (p.g) {
    const double TV = p.x.T * static_cast<double>(p.V), c = p.eager_upcast ? 4 : p.x.c;
    const double upcast = c != 4 ? TV * (c + 4) : 0;
    p.g->add("loss.cross_entropy", op_class::loss, upcast + 8 * TV, (c != 4 ? 1 : 0) + 4, 4 * TV + 12 * TV + upcast,
             (c != 4 ? 1 : 0) + 3);
  }
  if (!p.inv) return;
  inventory_builder& inv = *p.inv;
  const std::uint64_t tokens = p.b * p.s, V = p.V;
  if (p.compute != dtype::fp32 && !p.eager_upcast)
    inv.span("loss.logits_fp32", {tokens, V}, dtype::fp32, tensor_category::logits, ek::loss, ek::loss);
  inv.span("loss.log_probs", {tokens, V}, dtype::fp32, tensor_category::logits, ek::loss, ek::bwd_head);
  if (p.final_norm_out) p.free_after_latest(p.final_norm_out);
  inv.span("loss.shift_labels", {tokens}, dtype::i64, tensor_category::logits, ek::loss, ek::bwd_head);
  inv.span("loss.grad_log_probs", {tokens, V}, dtype::fp32, tensor_category::logits, ek::bwd_head, ek::bwd_head);
  inv.span("loss.grad_logits_fp32", {tokens, V}, dtype::fp32, tensor_category::logits, ek::bwd_head, ek::bwd_head);
}

// torchtune's CEWithChunkedOutputLoss, run eagerly: for each chunk of the logits in turn, logits.float() (freed
// once log_softmax has written its output), cross_entropy = log_softmax, whose fp32 output is saved, then
// nll_loss (reduction="sum"). The recipe then deletes the bf16 chunks: in backward each chunk's
// nll_loss_backward, log_softmax_backward and cast back run one chunk at a time, and the output projection's
// backward per chunk; tensor_split's backward (SliceBackward0) writes each chunk's input gradient into a
// zero-filled [b, s, h] tensor, summed into the hidden states' gradient. torch.compile, which torchtune applies
// to compute_cross_entropy, is not modelled: this is the eager loss.
void loss_chunked(head_pass& p) {
  const std::uint64_t n = p.chunking.chunks;
  if (p.g) {
    const double TV = p.x.T * static_cast<double>(p.V), c = p.x.c, N = static_cast<double>(n), Er = p.x.E * p.x.r;
    const double upcast = c != 4 ? TV * (c + 4) : 0;
    p.g->add("loss.cross_entropy", op_class::loss, upcast + 8 * TV, N * ((c != 4 ? 1 : 0) + 4), 4 * TV + 12 * TV + upcast,
             N * ((c != 4 ? 1 : 0) + 3));
    // Per chunk a zero fill of [b, s, h] and the chunk's copy; the chunks' gradients summed (one add fewer).
    p.g->add("loss.chunk_grad_gather", op_class::elementwise, 0, 0, N * Er + 2 * Er + (N - 1) * 3 * Er, 3 * N - 1);
  }
  if (!p.inv) return;
  inventory_builder& inv = *p.inv;
  const std::uint64_t tokens = p.b * p.s, V = p.V, rows = p.chunking.largest_rows;
  // One chunk's fp32 copy at a time: freed once its log_softmax output exists.
  if (p.compute != dtype::fp32)
    inv.span("loss.logits_fp32", {rows, V}, dtype::fp32, tensor_category::logits, ek::loss, ek::loss);
  // Every chunk's log-probabilities, saved by its log_softmax until that chunk's backward.
  for (std::uint64_t i = 0; i < n; ++i)
    inv.span("loss.log_probs", {chunked_loss_rows(p.run, n, i), V}, dtype::fp32, tensor_category::logits, ek::loss,
             ek::bwd_head);
  if (p.final_norm_out) p.free_after_latest(p.final_norm_out);
  inv.span("loss.shift_labels", {tokens}, dtype::i64, tensor_category::logits, ek::loss, ek::bwd_head);
  // One chunk's backward at a time: the gradients of its log-probabilities and of its fp32 logits coexist.
  inv.span("loss.grad_log_probs", {rows, V}, dtype::fp32, tensor_category::logits, ek::bwd_head, ek::bwd_head);
  inv.span("loss.grad_logits_fp32", {rows, V}, dtype::fp32, tensor_category::logits, ek::bwd_head, ek::bwd_head);
  // SliceBackward0's zero-filled [b, s, h] gradient of one chunk's input, beside the sum it is added to.
  inv.span("loss.chunk_grad_hidden", {p.b, p.s, p.h}, p.param, tensor_category::logits, ek::bwd_head, ek::bwd_head);
}

// Liger's LigerFusedLinearCrossEntropyFunction (reduction "mean", liger_kernel/ops/fused_linear_cross_entropy.py):
// the head and the loss in one autograd Function that saves only gradients. Its forward zero-fills grad_input
// [BT, h] in the hidden states' dtype, grad_weight [V, h] in the weight's (accum_dtype None, the default) and an
// fp32 loss_1d [BT]; then per chunk of hf_loss_chunks' size: the chunk's logits (input chunk @ weight.t(), under
// autocast on a bf16 cast of both, the weight's cast cached), the cross-entropy kernel writing the logits'
// gradient over them in place, grad_input's rows = that @ weight, and grad_weight += its transpose @ the input
// chunk (addmm, fp32 out_dtype for an fp32 weight). Backward only scales the saved gradients (element_mul_kernel)
// when the loss's gradient is not 1. No logits outlive a chunk; the head's three GEMMs all run in the forward.
void loss_fused_linear(head_pass& p) {
  const hf_kernels::hf_shape& x = p.x;
  const bool head_trains = p.full;
  // torch.mm(..., out=) into preallocated buffers only outside autocast, with input and weight of one dtype
  // (_can_use_mm_out); otherwise each chunk's logits and its grad_input rows are new tensors.
  const bool mm_out = !p.autocast && p.param == p.compute;
  if (p.g) {
    const double N = static_cast<double>(p.chunking.chunks), V = static_cast<double>(p.V), TV = x.T * V, Vh = V * x.h;
    const double weight_acc = x.w;  // grad_weight in the weight's dtype
    if (x.amp) {  // autocast's bf16 copy of the weight: cached when it trains, else cast for each GEMM
      const double casts = head_trains ? 1 : 2 * N;
      p.g->add("loss.fused_linear.weight_cast", op_class::elementwise, casts * Vh * (4 + x.c), casts, 0, 0);
      p.g->add("loss.fused_linear.input_casts", op_class::elementwise, 2 * x.E * (4 + x.c), 2 * N, 0, 0);
    }
    p.g->add("loss.fused_linear.zero_fill", op_class::elementwise, x.E * x.r + (head_trains ? Vh * weight_acc : 0) + 4 * x.T,
             head_trains ? 3 : 2, 0, 0);
    // Each chunk's GEMMs read the whole weight: the logits, grad_input's rows, grad_weight's update (read and written).
    double gemm_bytes = 2 * (N * Vh * x.c + x.E * x.c + TV * x.c), gemms = 2 * N, gemm_flops = 2 * 2 * TV * x.h;
    if (head_trains) gemm_bytes += TV * x.c + x.E * x.c + N * Vh * 2 * weight_acc, gemms += N, gemm_flops += 2 * TV * x.h;
    p.g->add("loss.fused_linear.gemms", op_class::gemm, gemm_bytes, gemms, 0, 0, gemm_flops, 0);
    // The cross-entropy kernel: a pass for the row's max and sum, a pass writing the gradient in place.
    p.g->add("loss.cross_entropy", op_class::loss, 3 * TV * x.c, N, 0, 0);
    if (!mm_out) p.g->add("loss.fused_linear.grad_input_copy", op_class::elementwise, x.E * (x.c + x.r), N, 0, 0);
    // Backward: grad_input and grad_weight scaled by the loss's gradient, unless it is 1 (accumulation divides
    // the loss; fp16's loss scaling multiplies it).
    if (p.run.grad_accum > 1 || (x.c == 2 && p.layout.loss_scaling))
      p.g->add("loss.fused_linear.scale_grads", op_class::elementwise, 0, 0, 2 * (x.E * x.r + (head_trains ? Vh * x.w : 0)),
               head_trains ? 2 : 1);
  }
  if (!p.inv) return;
  inventory_builder& inv = *p.inv;
  const std::uint64_t tokens = p.b * p.s, V = p.V, h = p.h, rows = p.chunking.largest_rows;
  // The head's bf16 copy under autocast: made by the first chunk's GEMM, dropped when the autocast region exits
  // after the loss (nothing saves it).
  if (p.autocast && (p.full || p.peft_lora) && p.run.zero < 3)
    inv.span("lm_head.autocast.weight", {V, h}, p.compute, tensor_category::weights, ek::loss, ek::loss).role =
        tensor_role::frozen_weights;
  // grad_input: saved for backward, which returns it as the hidden states' gradient.
  inv.span("loss.grad_input", {tokens, h}, p.param, tensor_category::logits, ek::loss, ek::bwd_head);
  // grad_weight: saved too; the head's backward hands it on as the weight's gradient (the model state's rows
  // from there).
  if (head_trains)
    inv.span("loss.grad_weight", {V, h}, p.param, tensor_category::logits, ek::loss, ek::loss);
  inv.span("loss.loss_1d", {tokens}, dtype::fp32, tensor_category::logits, ek::loss, ek::loss);
  if (p.autocast) inv.span("loss.input_chunk", {rows, h}, p.compute, tensor_category::logits, ek::loss, ek::loss);
  // One chunk's logits (then its gradient, in place): with mm_out the one buffer every chunk reuses.
  inv.span("loss.logits_chunk", {rows, V}, p.compute, tensor_category::logits, ek::loss, ek::loss);
  if (!mm_out) inv.span("loss.grad_input_chunk", {rows, h}, p.compute, tensor_category::logits, ek::loss, ek::loss);
  if (p.final_norm_out) p.free_after_latest(p.final_norm_out);
}

// The cross-entropy compiled (--compile; hf_compile.hpp): Hugging Face's ForCausalLMLoss inside the compiled model
// (the Trainer's torch_compile compiles the whole model), as torchtune's compiled chunked loss (compute_cross_entropy
// compiled, one graph per chunk; torchtune's standard path upcasts the logits eagerly in TransformerDecoder's
// forward, which it does not compile). The partitioner
// (torch/_functorch/partitioners.py, min_cut_rematerialization_partition) saves the graph's input, the 16-bit
// logits (or chunk), and the per-row logsumexp (a reduction far smaller than its input: ban_if_reduction), and
// recomputes log_softmax in the backward; Inductor fuses the fp32 upcast into the reductions' loads, so no
// [T, V] fp32 tensor is ever written. Its backward is one fused kernel writing the logits' gradient in their dtype.
// Kernels: forward the logsumexp reduction and the target's gather and mean (each reads the logits once);
// backward one read of the logits, one write of their gradient.
// Compiled apart from an eager head that upcast the logits already (eager_upcast: torchtune's compile_loss of
// torch.nn.CrossEntropyLoss), the graph's input is the fp32 logits, which it saves (lm_head's `logits.fp32`
// row), and its backward writes an fp32 gradient, which the upcast's backward casts back.
void loss_compiled(head_pass& p) {
  const bool chunked = p.chunked;
  const std::uint64_t n = chunked ? p.chunking.chunks : 1;
  const dtype read = p.eager_upcast ? dtype::fp32 : p.compute;
  if (p.g) {
    const double TV = p.x.T * static_cast<double>(p.V), c = static_cast<double>(dtype_bytes(read)),
                 N = static_cast<double>(n), Er = p.x.E * p.x.r;
    p.g->add("loss.cross_entropy", op_class::loss, 2 * TV * c, 2 * N, 2 * TV * c, N);
    if (chunked)  // as the eager chunked loss: tensor_split's backward per chunk
      p.g->add("loss.chunk_grad_gather", op_class::elementwise, 0, 0, N * Er + 2 * Er + (N - 1) * 3 * Er, 3 * N - 1);
  }
  if (!p.inv) return;
  inventory_builder& inv = *p.inv;
  const std::uint64_t tokens = p.b * p.s, V = p.V, rows = chunked ? p.chunking.largest_rows : tokens;
  inv.span("loss.logsumexp", {tokens}, dtype::fp32, tensor_category::logits, ek::loss, ek::bwd_head);
  if (p.final_norm_out) p.free_after_latest(p.final_norm_out);
  inv.span("loss.shift_labels", {tokens}, dtype::i64, tensor_category::logits, ek::loss, ek::bwd_head);
  // The logits' gradient (one chunk's at a time), in the dtype the graph read them in. After an eager upcast the
  // cast back runs once the compiled backward has returned and autograd has freed what its graph saved (the
  // fp32 logits): its 16-bit gradient, half the fp32 logits' size, replaces them and is not a row of its own.
  if (p.eager_upcast)
    inv.span("loss.grad_logits_fp32", {rows, V}, dtype::fp32, tensor_category::logits, ek::bwd_head, ek::bwd_head);
  else
    inv.span("loss.grad_logits", {rows, V}, p.compute, tensor_category::logits, ek::bwd_head, ek::bwd_head);
  if (chunked)  // SliceBackward0's zero-filled [b, s, h] gradient of one chunk's input, as eagerly
    inv.span("loss.chunk_grad_hidden", {p.b, p.s, p.h}, p.param, tensor_category::logits, ek::bwd_head, ek::bwd_head);
}

void loss(head_pass& p) {
  // (Liger's fused linear loss is its own Triton autograd Function: modelled as it runs eagerly.)
  if (compiles_loss(p.run) && p.run.loss != loss_kind::fused_linear) return loss_compiled(p);
  switch (p.run.loss) {
    case loss_kind::standard: return loss_standard(p);
    case loss_kind::chunked: return loss_chunked(p);
    case loss_kind::fused_linear: return loss_fused_linear(p);
  }
}

// The operations around the layers, in program order.
constexpr void (*head_ops[])(head_pass&) = {embedding, final_norm, lm_head, logit_softcap, loss};

}  // namespace

void add_hf_head_buffers(inventory_builder& inv, const model_spec& m, const run_config& run,
                         const precision_layout& layout, const hf_head_layout& head) {
  head_pass p{m, run, layout, &inv, head};
  for (auto op : head_ops) op(p);
}

void add_hf_head_kernels(ops::row_group& head, const model_spec& m, const run_config& run, const precision_layout& layout,
                         const stack_traits& traits) {
  head_pass p{m, run, layout, nullptr, {.model_upcasts_logits = traits.model_upcasts_logits}, &head,
              hf_kernels::shape_of(m, run, layout, traits)};
  for (auto op : head_ops) op(p);
}

}  // namespace trainplan
