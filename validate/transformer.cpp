// One micro-batch of the harness's transformer (transformer.hpp) through the backend's kernels: embedding,
// layers (dense or Mixture of Experts), head and loss, then backward, each buffer allocated under the
// inventory's name at the planner's events and recomputed where the run recomputes.
#include "validate/transformer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/activation.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/dropout.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gemm.hpp"
#include "kernels/moe_combine.hpp"
#include "kernels/moe_router.hpp"
#include "kernels/norm.hpp"
#include "planner/util/input_error.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/run/moe.hpp"
#include "planner/model/param_count.hpp"

namespace trainplan::validate {

using kernels::view;

namespace {

enum dropout_kind { dropout_embed = 0, dropout_probs = 1, dropout_attn_out = 2, dropout_mlp_out = 3 };

}  // namespace

transformer::transformer(const model_spec& m, const run_config& run, const precision_layout& layout,
                         const inventory& buffers, tracking_allocator& alloc, model_state& state, std::uint64_t seed)
    : m_(m), run_(run), layout_(layout), inv_(buffers), alloc_(alloc), ops_(alloc.ops()), state_(state), seed_(seed) {
  shape_ = {run.micro_batch, run.seq, m.heads, m.kv_heads, m.head_dim};
  rows_ = run.micro_batch * run.seq;
  layers_.resize(m.layers);
  if (m.is_moe()) {
    if (!ops_.moe_router_forward)
      throw input_error(fmt::format("MoE runs on the CPU backend only: the {} backend has no routing kernels yet", ops_.backend));
    // Capacity: the planner's rows per expert, ceil(c * k * b * s / E) (planner/run/moe.hpp), so both count the same rows.
    dispatch_ = {rows_, m.experts, m.experts_per_token, run.capacity_factor > 0 ? routed_rows(m, run) / m.experts : 0};
  }
  token_losses_ = act("loss.token_losses");
  // llm.c's padded rows: zero from model_state on, and zero they stay (no token indexes them, the loss
  // gives their logits zero gradient, so AdamW, weight decay included, leaves them at zero).
  vocab_rows_ = vocab_rows(m, profile_of(run).traits.vocab_pad_multiple);
}

void transformer::mark(int step, std::uint64_t mb, const char* kind, std::uint64_t layer, const std::string& label) {
  alloc_.mark_phase({fmt::format("step {}, micro-batch {}, {}", step + 1, mb + 1, label), step + 1, mb, kind, layer, 0});
}

tensor transformer::act(const std::string& name) {
  // The planner's inventory (the harness's profile's) is the one list of buffers: the harness names what it
  // computes, the inventory says its shape and dtype.
  const std::string key = name_template(name);
  for (const tensor_spec& t : inv_.tensors)
    if (t.name == key) return alloc_.allocate(name, t.shape.to_vector(), t.type);
  throw std::logic_error(fmt::format("the harness allocates {}, which the planner's inventory does not list", name));
}

std::string transformer::pname(std::uint64_t layer, const char* suffix) const { return fmt::format("layer{}.{}", layer, suffix); }

std::uint64_t transformer::site(int step, std::uint64_t mb, std::uint64_t layer, int kind) const {
  return ((static_cast<std::uint64_t>(step) * 1000003ull + mb) * 4099ull + layer) * 8ull + static_cast<std::uint64_t>(kind);
}

void transformer::run_micro_batch(int step, std::uint64_t mb, float loss_scale) {
  mark(step, mb, "fwd_embed", 0, "forward embedding");
  embed_forward(step, mb);
  for (std::uint64_t i = 0; i < m_.layers; ++i) {
    mark(step, mb, "fwd_layer", i, fmt::format("forward layer {}", i));
    tensor& output = i + 1 < m_.layers ? layers_[i + 1].ln1_in : final_norm_in_;
    output = act(i + 1 < m_.layers ? pname(i + 1, "ln1.in") : "final_norm.in");
    layer_forward(i, step, mb, &output);
    drop_unkept(layers_[i]);
  }
  head_forward_and_loss(step, mb, loss_scale);
  mark(step, mb, "bwd_head", 0, "backward head");
  head_backward();
  for (std::uint64_t k = 0; k < m_.layers; ++k) {
    const std::uint64_t i = m_.layers - 1 - k;
    mark(step, mb, "bwd_layer", i, fmt::format("backward layer {}", i));
    layer_backward(i, step, mb);
  }
  mark(step, mb, "bwd_embed", 0, "backward embedding");
  embed_backward();
  ++micro_batches_in_losses_;
}

double transformer::take_mean_loss() {
  if (micro_batches_in_losses_ == 0) throw std::logic_error("take_mean_loss: no micro-batch has run since the last read");
  std::vector<float> losses(rows_);
  ops_.download(losses.data(), token_losses_.view().data, rows_ * sizeof(float));  // the step's one wait
  double sum = 0;
  for (float l : losses) sum += l;
  token_losses_.fill(0.0f);
  const double mean = sum / static_cast<double>(rows_ * micro_batches_in_losses_);
  micro_batches_in_losses_ = 0;
  return mean;
}

void transformer::embed_forward(int step, std::uint64_t mb) {
  const std::uint64_t b = run_.micro_batch, s = run_.seq, h = m_.hidden;
  tokens_ = act("batch.tokens");
  targets_ = act("batch.targets");
  // Each sample is s + 1 tokens: inputs are the first s, targets the last s. Made on the host, copied to
  // where the backend computes.
  std::vector<std::int32_t> tokens(b * s), targets(b * s);
  // Ids given from outside (tests, fixtures) are checked once here, where they enter the step: the CUDA kernels
  // index the embedding table and the logits by them without a check (one would need a read-back). Generated
  // ids are below the vocabulary by construction.
  for (const auto* fixed : {&fixed_tokens, &fixed_targets}) {
    if (!*fixed) continue;
    const std::vector<std::int32_t>& ids = **fixed;
    if (ids.size() != b * s)
      throw std::invalid_argument(fmt::format("{} fixed ids given for a batch of {} x {} tokens", ids.size(), b, s));
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (ids[i] < 0 || static_cast<std::uint64_t>(ids[i]) >= m_.vocab)
        throw std::invalid_argument(fmt::format("{} id {} at position {} is outside the vocabulary of {} of {}",
                                                fixed == &fixed_tokens ? "token" : "target", ids[i], i, m_.vocab, m_.name));
  }
  for (std::uint64_t r = 0; r < b; ++r)
    for (std::uint64_t t = 0; t < s; ++t) {
      const std::uint64_t i = r * s + t;
      auto token_at = [&](std::uint64_t pos) {
        const std::uint64_t stream = (static_cast<std::uint64_t>(step) << 32) ^ (mb << 16) ^ r;
        return static_cast<std::int32_t>(kernels::splitmix64(kernels::splitmix64(seed_ ^ 0xda7a) ^ stream ^ (pos << 40)) %
                                         m_.vocab);
      };
      tokens[i] = fixed_tokens ? (*fixed_tokens)[i] : token_at(t);
      targets[i] = fixed_targets ? (*fixed_targets)[i] : token_at(t + 1);
    }
  ops_.upload(tokens_.view().data, tokens.data(), tokens.size() * sizeof(std::int32_t));
  ops_.upload(targets_.view().data, targets.data(), targets.size() * sizeof(std::int32_t));
  layer_buffers& first = layers_[0];
  first.ln1_in = act(pname(0, "ln1.in"));
  const view wpe = state_.has("embed.positions") ? state_.weight("embed.positions") : view{};
  ops_.embedding_forward(tokens_.view(), state_.weight("embed.tokens"), wpe, first.ln1_in.view(), b, s, h);
  if (run_.dropout > 0) {
    embed_mask_ = act("embed.dropout_mask");
    ops_.dropout_mask(seed_, site(step, mb, 0, dropout_embed), static_cast<float>(run_.dropout), embed_mask_.view(), rows_ * h);
    const view x = first.ln1_in.view(), mask = embed_mask_.view();
    ops_.dropout_apply(x, &mask, 1.0f / (1.0f - static_cast<float>(run_.dropout)), x, rows_ * h);
  }
}

void transformer::layer_forward(std::uint64_t i, int step, std::uint64_t mb, tensor* output) {
  layer_buffers& l = layers_[i];
  const std::uint64_t h = m_.hidden, f = m_.ffn;
  const std::uint64_t qkv_w = m_.qkv_width(), hq = m_.q_width();
  const bool gpt = m_.family == model_family::gpt, dropout = run_.dropout > 0, eager = run_.attention == attention_kind::eager;
  const float p = static_cast<float>(run_.dropout), keep_scale = 1.0f / (1.0f - p);
  auto w = [&](const char* suffix) { return state_.weight(pname(i, suffix)); };

  if (!l.qkv_in) {
    l.qkv_in = act(pname(i, "attn.qkv_in"));
    if (gpt) ops_.layer_norm_forward(l.ln1_in.view(), w("ln1.weight"), w("ln1.bias"), l.qkv_in.view(), rows_, h);
    else ops_.rms_norm_forward(l.ln1_in.view(), w("ln1.weight"), l.qkv_in.view(), rows_, h);
  }
  if (!l.qkv) {
    l.qkv = act(pname(i, "attn.qkv"));
    const bool bias = state_.has(pname(i, "attn.qkv.bias"));
    const view qkv_bias = bias ? w("attn.qkv.bias") : view{};
    ops_.linear_forward(l.qkv_in.view(), w("attn.qkv.weight"), bias ? &qkv_bias : nullptr, l.qkv.view(), rows_, qkv_w, h);
    if (!gpt) ops_.rope_apply(shape_, l.qkv.view(), false);
  }
  const kernels::attention_dropout drop{p, seed_, site(step, mb, i, dropout_probs)};
  const bool core_missing = eager ? !l.softmax : !l.lse;
  if (core_missing || !l.out_in) {
    if (!l.out_in) l.out_in = act(pname(i, "attn.out_in"));
    if (eager) {
      l.softmax = act(pname(i, "attn.softmax"));
      if (dropout) {
        l.softmax_mask = act(pname(i, "attn.softmax_dropout_mask"));
        l.softmax_dropped = act(pname(i, "attn.softmax_dropout"));
      }
      ops_.eager_attention_forward(shape_, l.qkv.view(), l.softmax.view(), l.softmax_mask.view(),
                                       l.softmax_dropped.view(), drop, l.out_in.view());
    } else {
      l.lse = act(pname(i, "attn.lse"));
      ops_.flash_attention_forward(shape_, l.qkv.view(), drop, l.out_in.view(), l.lse.view());
    }
  }
  if (dropout && !l.attn_mask) {
    l.attn_mask = act(pname(i, "attn.dropout_mask"));
    ops_.dropout_mask(seed_, site(step, mb, i, dropout_attn_out), p, l.attn_mask.view(), rows_ * h);
  }
  if (!l.ln2_in) {
    l.ln2_in = act(pname(i, "ln2.in"));
    const bool bias = state_.has(pname(i, "attn.out.bias"));
    const view out_bias = bias ? w("attn.out.bias") : view{};
    const view x = l.ln1_in.view(), y = l.ln2_in.view(), mask = l.attn_mask.view();
    ops_.linear_forward(l.out_in.view(), w("attn.out.weight"), bias ? &out_bias : nullptr, y, rows_, h, hq);
    // The residual add and the MLP's norm in one pass. ln2.in and mlp.fc_in are kept or dropped together
    // (drop_unkept), so both are missing here or neither is.
    l.fc_in = act(pname(i, "mlp.fc_in"));
    const view norm_bias = gpt ? w("ln2.bias") : view{};
    ops_.residual_norm_forward(x, dropout ? &mask : nullptr, keep_scale, y, w("ln2.weight"), gpt ? &norm_bias : nullptr,
                               l.fc_in.view(), rows_, h);
  }
  if (m_.is_moe()) {
    moe_forward(i, output);
  } else if (!l.mlp_a) {
    if (gpt) {
      l.mlp_a = act(pname(i, "mlp.gelu_in"));
      l.mlp_b = act(pname(i, "mlp.proj_in"));
      const view fc_bias = w("mlp.fc.bias");
      ops_.linear_forward(l.fc_in.view(), w("mlp.fc.weight"), &fc_bias, l.mlp_a.view(), rows_, f, h);
      ops_.gelu_forward(l.mlp_a.view(), l.mlp_b.view(), rows_ * f);
    } else {
      l.mlp_a = act(pname(i, "mlp.gate"));
      l.mlp_b = act(pname(i, "mlp.up"));
      l.mlp_c = act(pname(i, "mlp.down_in"));
      ops_.linear_forward(l.fc_in.view(), w("mlp.gate.weight"), nullptr, l.mlp_a.view(), rows_, f, h);
      ops_.linear_forward(l.fc_in.view(), w("mlp.up.weight"), nullptr, l.mlp_b.view(), rows_, f, h);
      ops_.swiglu_forward(l.mlp_a.view(), l.mlp_b.view(), l.mlp_c.view(), rows_ * f);
    }
  }
  if (dropout && !l.mlp_mask) {
    l.mlp_mask = act(pname(i, "mlp.dropout_mask"));
    ops_.dropout_mask(seed_, site(step, mb, i, dropout_mlp_out), p, l.mlp_mask.view(), rows_ * h);
  }
  if (output) {
    const view x = l.ln2_in.view(), y = output->view(), mask = l.mlp_mask.view();
    if (!m_.is_moe()) {  // the experts' combine already wrote y
      const view& down_in = gpt ? l.mlp_b.view() : l.mlp_c.view();
      const view proj_bias = gpt ? w("mlp.proj.bias") : view{};
      ops_.linear_forward(down_in, w(gpt ? "mlp.proj.weight" : "mlp.down.weight"), gpt ? &proj_bias : nullptr, y, rows_, h, f);
    }
    ops_.residual_dropout(x, dropout ? &mask : nullptr, keep_scale, y, rows_ * h);
  }
}

kernels::moe_row_map transformer::moe_rows(const layer_buffers& l) const {
  // The expert row ranges drive the host's GEMM loop: the indices come back from where they were computed.
  std::vector<std::int64_t> indices(dispatch_.tokens * dispatch_.top_k);
  ops_.download(indices.data(), l.topk_indices.view().data, indices.size() * sizeof(std::int64_t));
  return kernels::make_moe_row_map(dispatch_, {indices.data(), dtype::i64, indices.size()});
}

void transformer::moe_forward(std::uint64_t i, tensor* output) {
  layer_buffers& l = layers_[i];
  const std::uint64_t h = m_.hidden, f = m_.ffn, E = m_.experts, k = m_.experts_per_token, R = dispatch_.rows();
  auto w = [&](const char* suffix) { return state_.weight(pname(i, suffix)); };
  if (!l.router_probs) {
    l.router_probs = act(pname(i, "moe.router_probs"));
    l.topk_indices = act(pname(i, "moe.topk_indices"));
    l.topk_weights = act(pname(i, "moe.topk_weights"));
    // Router GEMM (h -> E, no bias) straight into the fp32 buffer (the GEMM accumulates in fp32), then the
    // softmax in place: the logits need no buffer of their own.
    const view probs = l.router_probs.view();
    ops_.linear_forward(l.fc_in.view(), w("moe.router.weight"), nullptr, probs, rows_, E, h);
    ops_.moe_router_forward(probs, probs, l.topk_indices.view(), l.topk_weights.view(), rows_, E, k);
  }
  if (!l.permuted_in) {
    l.permuted_in = act(pname(i, "moe.permuted_in"));  // (R, h)
    ops_.moe_permute_forward(dispatch_, l.topk_indices.view(), l.fc_in.view(), l.permuted_in.view(), h);
  }
  const kernels::moe_row_map map = moe_rows(l);
  // Expert e's weights: slice e of each stacked (E, f, h) / (E, h, f) tensor (planner/model/param_count.cpp).
  auto expert = [&](const view& stacked, std::uint64_t e) { return stacked.slice(e * f * h, f * h); };
  if (!l.mlp_a) {  // each expert's SwiGLU over its rows (padding rows are zeros and stay zeros)
    l.mlp_a = act(pname(i, "mlp.gate"));    // (R, f)
    l.mlp_b = act(pname(i, "mlp.up"));      // (R, f)
    l.mlp_c = act(pname(i, "mlp.down_in"));  // (R, f)
    for (std::uint64_t e = 0; e < E; ++e) {
      const std::uint64_t r0 = map.expert_first_row[e], n = map.expert_rows[e];
      if (n == 0) continue;
      const view x = l.permuted_in.view().slice(r0 * h, n * h);
      ops_.linear_forward(x, expert(w("moe.experts.gate.weight"), e), nullptr, l.mlp_a.view().slice(r0 * f, n * f), n, f, h);
      ops_.linear_forward(x, expert(w("moe.experts.up.weight"), e), nullptr, l.mlp_b.view().slice(r0 * f, n * f), n, f, h);
    }
    ops_.swiglu_forward(l.mlp_a.view(), l.mlp_b.view(), l.mlp_c.view(), R * f);
  }
  if (!l.expert_out) {
    l.expert_out = act(pname(i, "moe.expert_out"));  // (R, h)
    for (std::uint64_t e = 0; e < E; ++e) {
      const std::uint64_t r0 = map.expert_first_row[e], n = map.expert_rows[e];
      if (n == 0) continue;
      ops_.linear_forward(l.mlp_c.view().slice(r0 * f, n * f), expert(w("moe.experts.down.weight"), e), nullptr,
                          l.expert_out.view().slice(r0 * h, n * h), n, h, f);
    }
  }
  if (output)
    ops_.moe_combine_forward(dispatch_, l.topk_indices.view(), l.topk_weights.view(), l.expert_out.view(), output->view(), h);
}

void transformer::moe_backward(std::uint64_t i) {
  layer_buffers& l = layers_[i];
  const std::uint64_t h = m_.hidden, f = m_.ffn, E = m_.experts, k = m_.experts_per_token, R = dispatch_.rows();
  auto w = [&](const char* suffix) { return state_.weight(pname(i, suffix)); };
  auto g = [&](const char* suffix) { return state_.grad(pname(i, suffix)); };
  auto expert = [&](const view& stacked, std::uint64_t e) { return stacked.slice(e * f * h, f * h); };
  const view d_hid = bwd_.d_hidden.view(), d_rows = bwd_.d_expert_rows.view();
  const view indices = l.topk_indices.view(), weights = l.topk_weights.view(), probs = l.router_probs.view();
  // Combine: d_rows = d(expert_out); d(weights) written over the weights, which the backward no longer reads.
  ops_.moe_combine_backward(dispatch_, indices, weights, l.expert_out.view(), d_hid, d_rows, weights, h);
  // Router: d(logits) over the probabilities; its GEMM's input gradient starts d(fc_in) in d_hidden, whose
  // d(output) was read in full by the combine's backward.
  ops_.moe_router_backward(probs, indices, weights, probs, rows_, E, k);
  ops_.linear_backward_weight(probs, l.fc_in.view(), g("moe.router.weight"), nullptr, rows_, E, h);
  ops_.linear_backward_input(probs, w("moe.router.weight"), d_hid, rows_, E, h, false);
  // Experts: down, SwiGLU, gate and up, each over its rows; d_gate and d_up in d_ffn as for a dense MLP.
  const kernels::moe_row_map map = moe_rows(l);
  const view d_ffn = bwd_.d_ffn.view(), d_gate = d_ffn.slice(0, R * f), d_up = d_ffn.slice(R * f, R * f);
  for (std::uint64_t e = 0; e < E; ++e) {
    const std::uint64_t r0 = map.expert_first_row[e], n = map.expert_rows[e];
    if (n == 0) continue;
    const view dy = d_rows.slice(r0 * h, n * h);
    ops_.linear_backward_weight(dy, l.mlp_c.view().slice(r0 * f, n * f), expert(g("moe.experts.down.weight"), e), nullptr, n, h, f);
    ops_.linear_backward_input(dy, expert(w("moe.experts.down.weight"), e), d_gate.slice(r0 * f, n * f), n, h, f, false);
  }
  ops_.swiglu_backward(l.mlp_a.view(), l.mlp_b.view(), d_gate, d_gate, d_up, R * f);
  for (std::uint64_t e = 0; e < E; ++e) {  // d_rows now becomes d(permuted_in)
    const std::uint64_t r0 = map.expert_first_row[e], n = map.expert_rows[e];
    if (n == 0) continue;
    const view x = l.permuted_in.view().slice(r0 * h, n * h), dg = d_gate.slice(r0 * f, n * f), du = d_up.slice(r0 * f, n * f);
    const view dx = d_rows.slice(r0 * h, n * h);
    ops_.linear_backward_weight(dg, x, expert(g("moe.experts.gate.weight"), e), nullptr, n, f, h);
    ops_.linear_backward_weight(du, x, expert(g("moe.experts.up.weight"), e), nullptr, n, f, h);
    ops_.linear_backward_input(dg, expert(w("moe.experts.gate.weight"), e), dx, n, f, h, false);
    ops_.linear_backward_input(du, expert(w("moe.experts.up.weight"), e), dx, n, f, h, true);
  }
  // Permutation: each token gets back the gradient of the rows it sent.
  ops_.moe_permute_backward(dispatch_, indices, d_rows, d_hid, h);
}

void transformer::drop_unkept(layer_buffers& l) {
  if (run_.recompute == recompute_mode::full) {
    tensor keep = std::move(l.ln1_in);
    l = layer_buffers{};
    l.ln1_in = std::move(keep);
  } else if (run_.recompute == recompute_mode::selective && run_.attention == attention_kind::eager) {
    l.softmax.reset();
    l.softmax_mask.reset();
    l.softmax_dropped.reset();
  }
}

void transformer::head_forward_and_loss(int step, std::uint64_t mb, float loss_scale) {
  const std::uint64_t h = m_.hidden, V = m_.vocab;
  const bool gpt = m_.family == model_family::gpt;
  mark(step, mb, "fwd_head", 0, "forward head");
  lm_head_in_ = act("lm_head.in");
  if (gpt)
    ops_.layer_norm_forward(final_norm_in_.view(), state_.weight("final_norm.weight"), state_.weight("final_norm.bias"),
                                lm_head_in_.view(), rows_, h);
  else
    ops_.rms_norm_forward(final_norm_in_.view(), state_.weight("final_norm.weight"), lm_head_in_.view(), rows_, h);
  logits_ = act("logits");
  // Over the padded vocabulary (llm.c's Vp, a multiple of 128): the logits' rows 16-byte aligned for cuBLAS.
  const view head = state_.weight(m_.tied_embeddings ? "embed.tokens" : "lm_head.weight");
  ops_.linear_forward(lm_head_in_.view(), head, nullptr, logits_.view(), rows_, vocab_rows_, h);

  mark(step, mb, "loss", 0, "loss");
  // The fused classifier: the softmax in fp32 registers over the V classes, the gradient written over the
  // logits (zero in the padded columns).
  const float grad_scale = loss_scale / static_cast<float>(rows_ * run_.grad_accum);
  ops_.cross_entropy_forward_backward(logits_.view(), targets_.view(), logits_.view(), token_losses_.view(), rows_, V,
                                      vocab_rows_, grad_scale);
  targets_.reset();
}

void transformer::head_backward() {
  const std::uint64_t h = m_.hidden;
  const bool gpt = m_.family == model_family::gpt;
  state_.ensure_grads();
  bwd_.d_residual = act("bwd.d_residual");
  bwd_.d_hidden = act("bwd.d_hidden");
  bwd_.d_qkv = act("bwd.d_qkv");
  bwd_.d_ffn = act("bwd.d_ffn");
  if (m_.is_moe()) bwd_.d_expert_rows = act("bwd.d_expert_rows");
  if (run_.attention == attention_kind::eager) bwd_.d_scores = act("bwd.d_scores");
  else bwd_.flash_delta = act("bwd.flash_delta");
  bwd_.norm_partials = act("bwd.norm_partials");

  const char* head_name = m_.tied_embeddings ? "embed.tokens" : "lm_head.weight";
  const view d_logits = logits_.view();  // the loss wrote the logits' gradient over them
  // The padded rows' gradient is zero: d_logits is zero in their columns.
  ops_.linear_backward_weight(d_logits, lm_head_in_.view(), state_.grad(head_name), nullptr, rows_, vocab_rows_, h);
  ops_.linear_backward_input(d_logits, state_.weight(head_name), bwd_.d_hidden.view(), rows_, vocab_rows_, h, false);
  bwd_.d_residual.fill(0.0f);
  if (gpt)
    ops_.layer_norm_backward(final_norm_in_.view(), state_.weight("final_norm.weight"), bwd_.d_hidden.view(),
                             bwd_.d_residual.view(), state_.grad("final_norm.weight"), state_.grad("final_norm.bias"),
                             bwd_.norm_partials.view(), rows_, h);
  else
    ops_.rms_norm_backward(final_norm_in_.view(), state_.weight("final_norm.weight"), bwd_.d_hidden.view(),
                           bwd_.d_residual.view(), state_.grad("final_norm.weight"), bwd_.norm_partials.view(), rows_, h);
  logits_.reset();
  lm_head_in_.reset();
  final_norm_in_.reset();
}

void transformer::layer_backward(std::uint64_t i, int step, std::uint64_t mb) {
  layer_forward(i, step, mb, nullptr);  // recomputes what was not kept; a no-op without recomputation
  layer_buffers& l = layers_[i];
  const std::uint64_t h = m_.hidden, f = m_.ffn, hq = m_.q_width(), qkv_w = m_.qkv_width();
  const bool gpt = m_.family == model_family::gpt, dropout = run_.dropout > 0;
  const float keep_scale = 1.0f / (1.0f - static_cast<float>(run_.dropout));
  auto w = [&](const char* suffix) { return state_.weight(pname(i, suffix)); };
  auto g = [&](const char* suffix) { return state_.grad(pname(i, suffix)); };
  const view d_res = bwd_.d_residual.view(), d_hid = bwd_.d_hidden.view(), d_ffn = bwd_.d_ffn.view();
  const view partials = bwd_.norm_partials.view();

  // MLP: out = ln2.in + dropout(down(act(fc(norm(ln2.in)))))
  const view mlp_mask = l.mlp_mask.view();
  ops_.dropout_apply(d_res, dropout ? &mlp_mask : nullptr, keep_scale, d_hid, rows_ * h);
  if (m_.is_moe()) {
    moe_backward(i);  // d_hid: d(MLP output) in, d(mlp.fc_in) out
    ops_.rms_norm_backward(l.ln2_in.view(), w("ln2.weight"), d_hid, d_res, g("ln2.weight"), partials, rows_, h);
  } else if (gpt) {
    const view d_inner = d_ffn.slice(0, rows_ * f), d_proj_bias = g("mlp.proj.bias"), d_fc_bias = g("mlp.fc.bias");
    ops_.linear_backward_weight(d_hid, l.mlp_b.view(), g("mlp.proj.weight"), &d_proj_bias, rows_, h, f);
    ops_.linear_backward_input(d_hid, w("mlp.proj.weight"), d_inner, rows_, h, f, false);
    ops_.gelu_backward(l.mlp_a.view(), d_inner, d_inner, rows_ * f);
    ops_.linear_backward_weight(d_inner, l.fc_in.view(), g("mlp.fc.weight"), &d_fc_bias, rows_, f, h);
    ops_.linear_backward_input(d_inner, w("mlp.fc.weight"), d_hid, rows_, f, h, false);
    ops_.layer_norm_backward(l.ln2_in.view(), w("ln2.weight"), d_hid, d_res, g("ln2.weight"), g("ln2.bias"), partials,
                             rows_, h);
  } else {
    const view d_gate = d_ffn.slice(0, rows_ * f), d_up = d_ffn.slice(rows_ * f, rows_ * f);
    ops_.linear_backward_weight(d_hid, l.mlp_c.view(), g("mlp.down.weight"), nullptr, rows_, h, f);
    ops_.linear_backward_input(d_hid, w("mlp.down.weight"), d_gate, rows_, h, f, false);
    ops_.swiglu_backward(l.mlp_a.view(), l.mlp_b.view(), d_gate, d_gate, d_up, rows_ * f);
    ops_.linear_backward_weight(d_gate, l.fc_in.view(), g("mlp.gate.weight"), nullptr, rows_, f, h);
    ops_.linear_backward_weight(d_up, l.fc_in.view(), g("mlp.up.weight"), nullptr, rows_, f, h);
    ops_.linear_backward_input(d_gate, w("mlp.gate.weight"), d_hid, rows_, f, h, false);
    ops_.linear_backward_input(d_up, w("mlp.up.weight"), d_hid, rows_, f, h, true);
    ops_.rms_norm_backward(l.ln2_in.view(), w("ln2.weight"), d_hid, d_res, g("ln2.weight"), partials, rows_, h);
  }

  // Attention: ln2.in = ln1.in + dropout(out(attention(qkv(norm(ln1.in)))))
  const view attn_mask = l.attn_mask.view();
  ops_.dropout_apply(d_res, dropout ? &attn_mask : nullptr, keep_scale, d_hid, rows_ * h);
  const view d_out_in = d_ffn.slice(0, rows_ * hq);
  const bool out_bias = state_.has(pname(i, "attn.out.bias"));
  const view d_out_bias = out_bias ? g("attn.out.bias") : view{};
  ops_.linear_backward_weight(d_hid, l.out_in.view(), g("attn.out.weight"), out_bias ? &d_out_bias : nullptr, rows_, h, hq);
  ops_.linear_backward_input(d_hid, w("attn.out.weight"), d_out_in, rows_, h, hq, false);
  const kernels::attention_dropout drop{static_cast<float>(run_.dropout), seed_, site(step, mb, i, dropout_probs)};
  if (run_.attention == attention_kind::eager)
    ops_.eager_attention_backward(shape_, l.qkv.view(), l.softmax.view(), l.softmax_mask.view(), l.softmax_dropped.view(),
                                      drop, d_out_in, bwd_.d_scores.view(), bwd_.d_qkv.view());
  else
    ops_.flash_attention_backward(shape_, l.qkv.view(), l.out_in.view(), l.lse.view(), drop, d_out_in,
                                      bwd_.flash_delta.view(), bwd_.d_qkv.view());
  if (!gpt) ops_.rope_apply(shape_, bwd_.d_qkv.view(), true);
  const bool qkv_bias = state_.has(pname(i, "attn.qkv.bias"));
  const view d_qkv_bias = qkv_bias ? g("attn.qkv.bias") : view{};
  ops_.linear_backward_weight(bwd_.d_qkv.view(), l.qkv_in.view(), g("attn.qkv.weight"), qkv_bias ? &d_qkv_bias : nullptr,
                                  rows_, qkv_w, h);
  ops_.linear_backward_input(bwd_.d_qkv.view(), w("attn.qkv.weight"), d_hid, rows_, qkv_w, h, false);
  if (gpt)
    ops_.layer_norm_backward(l.ln1_in.view(), w("ln1.weight"), d_hid, d_res, g("ln1.weight"), g("ln1.bias"), partials,
                             rows_, h);
  else ops_.rms_norm_backward(l.ln1_in.view(), w("ln1.weight"), d_hid, d_res, g("ln1.weight"), partials, rows_, h);
  l = layer_buffers{};  // the layer's activations end with its backward
}

void transformer::embed_backward() {
  const std::uint64_t b = run_.micro_batch, s = run_.seq, h = m_.hidden;
  const view mask = embed_mask_.view();
  const float keep_scale = 1.0f / (1.0f - static_cast<float>(run_.dropout));
  ops_.dropout_apply(bwd_.d_residual.view(), run_.dropout > 0 ? &mask : nullptr, keep_scale, bwd_.d_hidden.view(), rows_ * h);
  const view d_wpe = state_.has("embed.positions") ? state_.grad("embed.positions") : view{};
  const tensor scratch = act("bwd.embed_grad_fp32");  // the V rows of real tokens: the padded ones get none
  ops_.embedding_backward(tokens_.view(), bwd_.d_hidden.view(), state_.grad("embed.tokens"), d_wpe, scratch.view(), b, s, h,
                          m_.vocab);
  tokens_.reset();
  embed_mask_.reset();
  bwd_ = backward_buffers{};
}

}  // namespace trainplan::validate
