#include "planner/profiles/llmc/inventory_llmc.hpp"

#include <algorithm>

#include "planner/memory/inventory_builder.hpp"
#include "planner/model/param_count.hpp"
#include "planner/profiles/own_kernels.hpp"

namespace trainplan {

void check_llmc_run(const model_spec& m, const run_config& run, const precision_layout& layout) {
  if (m.family != model_family::gpt) throw input_error("--framework llmc: llm.c's train_gpt2.cu trains the GPT-2 family only");
  if (run.dropout > 0) throw input_error("--framework llmc: llm.c has no dropout (give --dropout 0)");
  if (run.tp > 1 || run.pp > 1) throw input_error("--framework llmc: llm.c has no tensor or pipeline parallelism");
  if (run.zero > 1) throw input_error("--framework llmc: llm.c shards only the optimizer state (--zero 0 or 1)");
  if (run.offload != offload_mode::none || run.finetune != finetune_kind::full)
    throw input_error("--framework llmc: llm.c trains every weight on the GPU (no offload, no adapters)");
  if (run.optimizer != optimizer_kind::adamw) throw input_error("--framework llmc: llm.c's optimizer is AdamW");
  refuse_library_kernels("llmc", "in one fused classifier kernel over the whole logits (fused_classifier)", run);
  if (layout.regime != precision_regime::bf16_mixed && layout.regime != precision_regime::fp32)
    throw input_error(fmt::format("--framework llmc: llm.c builds bf16 with fp32 master weights (bf16-mixed) or fp32, not {}",
                                  precision_name(layout.regime)));
}

inventory build_llmc_inventory(const model_spec& m, const run_config& run, const precision_layout& layout) {
  check_llmc_run(m, run, layout);
  inventory out;
  inventory_builder inv(static_cast<std::int64_t>(m.layers), out.tensors);
  const std::uint64_t L = m.layers, B = run.micro_batch, T = run.seq, C = m.hidden, NH = m.heads,
                      Vp = vocab_rows(m, 128) /* padded_vocab_size */, maxT = m.max_positions > 0 ? m.max_positions : T;
  const dtype floatX = layout.activations;  // bf16, or fp32 in an fp32 build
  const bool bf16 = layout.regime == precision_regime::bf16_mixed;
  const char* what = "llm.c buffers";

  // ---- parameters (fill_in_parameter_sizes): wte (Vp,C), wpe (maxT,C), and per layer ln1 w/b, qkv w/b,
  // attention projection w/b, ln2 w/b, fc w/b, fc projection w/b; lnf w/b -----------------------------
  const std::uint64_t per_layer = checked_add(checked_mul(12, checked_mul(C, C, what), what), checked_mul(13, C, what), what);
  const std::uint64_t P = checked_add(checked_add(checked_mul(Vp, C, what), checked_mul(maxT, C, what), what),
                                      checked_add(checked_mul(L, per_layer, what), checked_mul(2, C, what), what), what);
  const std::uint64_t dp = run.data_parallel(), shard = run.zero >= 1 ? (P + dp - 1) / dp : P;
  inv.model_state(bf16 ? "weights.bf16" : "weights.fp32", P, floatX, tensor_category::weights, state_lifetime::whole_run,
                  tensor_role::trained_weights);
  // Gradients are allocated at the first backward and kept (llm.c never frees them).
  inv.model_state(bf16 ? "grads.bf16" : "grads.fp32", P, floatX, tensor_category::gradients, state_lifetime::whole_run,
                  tensor_role::gradients);
  // AdamW m, v and the fp32 master copy are allocated at the first update, shard-sized under ZeRO-1.
  inv.model_state("adam.m", shard, dtype::fp32, tensor_category::optimizer, state_lifetime::from_first_optimizer,
                  tensor_role::optimizer_state);
  inv.model_state("adam.v", shard, dtype::fp32, tensor_category::optimizer, state_lifetime::from_first_optimizer,
                  tensor_role::optimizer_state);
  if (bf16)
    inv.model_state("master.fp32", shard, dtype::fp32, tensor_category::master_weights, state_lifetime::from_first_optimizer,
                    tensor_role::master_weights);

  // ---- activations (fill_in_activation_sizes), one block for the whole run --------------------------
  // recompute: none = llm.c -r 0, selective = -r 1 (its default: GELU recomputed, one B*T*4C buffer),
  // full = -r 2 (the layernorm outputs recomputed too: ln1 and ln2 take no memory).
  const bool keep_gelu = run.recompute == recompute_mode::none, keep_ln = run.recompute != recompute_mode::full;
  const bool cudnn = run.attention == attention_kind::flash;  // USE_CUDNN=1 builds
  auto act = [&](std::string_view name, tensor_shape shape, dtype type, tensor_category cat = tensor_category::activations) {
    tensor_spec& t = inv.add(name, shape, type, cat);  // bytes checked against 64 bits
    t.lifetime = state_lifetime::whole_run;
  };
  act("encoded", {B, T, C}, floatX);
  if (keep_ln) act("ln1", {L, B, T, C}, floatX);
  act("ln1_mean_rstd", {2, L, B, T}, dtype::fp32);
  act("atty", {L, B, T, C}, floatX);
  // With cuDNN, att holds the fp32 log-sum-exp; without it, the full pre-softmax/softmax matrices.
  if (cudnn) act("att", {L, B, NH, T}, dtype::fp32);
  else act("att", {checked_mul(L, B, what), NH, T, T}, floatX);  // (L*B, NH, T, T)
  act("residual2", {L, B, T, C}, floatX);
  if (keep_ln) act("ln2", {L, B, T, C}, floatX);
  act("ln2_mean_rstd", {2, L, B, T}, dtype::fp32);
  act("fch", {L, B, T, 4 * C}, floatX);
  if (keep_gelu) act("fch_gelu", {L, B, T, 4 * C}, floatX);
  else act("fch_gelu", {B, T, 4 * C}, floatX);
  act("residual3", {L, B, T, C}, floatX);
  act("lnf", {B, T, C}, floatX);
  act("lnf_mean_rstd_losses", {3, B, T}, dtype::fp32);
  act("qkvr", {L, B, T, 3 * C}, floatX);
  // The fused classifier writes the logits' gradients over the logits in place; the same buffer is the
  // scratch of the non-cuDNN attention (B*NH*T per row).
  act("output", {B, T, std::max({3 * C, NH * T, Vp})}, floatX, tensor_category::logits);
  act("scratch_bt4c", {B, T, 4 * C}, floatX, tensor_category::activation_grads);
  act("scratch_btc", {B, T, C}, floatX, tensor_category::activation_grads);
  act("inputs_targets", {2, B, T}, dtype::i32);

  out.layers = m.layers;
  out.events_per_micro_batch = 2 * static_cast<std::int64_t>(m.layers) + 5;
  return out;
}

}  // namespace trainplan
