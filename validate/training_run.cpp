// Training steps on the harness (training_run.hpp): the configurations it refuses, then micro-batches
// accumulated into an AdamW step, with the dynamic loss scaling of fp16 and the record of each step.
#include "validate/training_run.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "planner/profiles/registry.hpp"
#include "planner/util/input_error.hpp"
#include "planner/model/param_count.hpp"

namespace trainplan::validate {

void check_harness_supports(const model_spec& m, const run_config& run) {
  // A learned position table has a row per position: a longer sequence would index past it (the harness's
  // embedding read and wrote the neighbouring buffers), as plan refuses it.
  if (m.max_positions > 0 && run.seq > m.max_positions)
    throw input_error(fmt::format("--seq {} is longer than model {}'s {} learned positions", run.seq, m.name,
                                  m.max_positions));
  // The harness's transformer is the plain gpt/llama block; running a Gemma-2-style model on it would
  // silently measure a different model. A window no shorter than the sequence changes nothing.
  if (m.norms_per_layer != 2 || m.mlp_gate != gate_activation::silu || m.embed_scale_sqrt_hidden ||
      m.attn_logit_softcap > 0 || m.final_logit_softcap > 0)
    throw input_error(fmt::format("the harness runs the plain gpt and llama blocks: {} has post-norms, GeGLU, an "
                                  "embedding scale or soft caps", m.name));
  if (m.qk_norm)
    throw input_error(fmt::format("the harness has no q/k norms yet: {} cannot be validated (plan predicts it)", m.name));
  if (m.is_mla() || m.dense_layers > 0)
    throw input_error(fmt::format("the harness has no multi-head latent attention and no dense first layers before the "
                                  "experts: {} cannot be validated (plan predicts it)", m.name));
  if (m.shared_expert_ffn > 0)
    throw input_error(fmt::format("the harness's Mixture-of-Experts layer has no shared expert: {} cannot be validated "
                                  "(plan predicts it)", m.name));
  if (m.sliding_window_tokens > 0 && run.seq > m.sliding_window_tokens)
    throw input_error(fmt::format("the harness has no sliding-window attention: use --seq {} or less for {}",
                                  m.sliding_window_tokens, m.name));
  if (run.precision != precision_regime::fp32 && run.precision != precision_regime::bf16_mixed &&
      run.precision != precision_regime::fp16_mixed)
    throw input_error(fmt::format("the harness runs fp32, bf16-mixed and fp16-mixed, not {}", precision_name(run.precision)));
  if (run.optimizer != optimizer_kind::adamw)
    throw input_error(fmt::format("the harness runs adamw, not {}", optimizer_name(run.optimizer)));
  if (run.gpus != 1 || run.tp != 1 || run.pp != 1 || run.ep != 1 || run.zero != 0 || run.offload != offload_mode::none)
    throw input_error("the harness runs one GPU's training step: no --gpus, --tp, --pp, --ep, --zero or --offload");
  if (run.finetune != finetune_kind::full) throw input_error("the harness trains every weight: no --finetune lora/qlora");
  if (&profile_of(run) != &harness_profile())
    throw input_error(fmt::format("the harness is --framework {}, not {}", harness_profile().name, profile_of(run).name));
}

training_run::training_run(const model_spec& m, const run_config& run, const training_options& opts,
                           const kernels::kernel_ops& ops)
    : model(m),
      config(run),
      layout(make_precision_layout(run.precision, run.grad_dtype)),
      options(opts),
      alloc(ops),
      // The parameters as the harness stores them: the vocabulary tables padded as llm.c's (vocab_rows).
      state(model, vocab_rows(model, profile_of(config).traits.vocab_pad_multiple), layout, alloc, opts.seed),
      buffers(build_inventory(model, config, layout)),
      net(model, config, layout, buffers, alloc, state, opts.seed),
      loss_scale_(layout.loss_scaling ? opts.initial_loss_scale : 1.0f) {
  check_harness_supports(m, run);
}

step_record training_run::step() {
  step_record rec;
  rec.step = static_cast<int>(records.size()) + 1;
  rec.loss_scale = loss_scale_;
  const int step_index = rec.step - 1;
  for (std::uint64_t mb = 0; mb < config.grad_accum; ++mb) {
    net.run_micro_batch(step_index, mb, loss_scale_);
    if (state.grads_accum)  // --grad-dtype fp32: fold this micro-batch's 16-bit gradients into fp32
      alloc.ops().accumulate_and_clear(state.grads_accum.view(), state.grads.view(), static_cast<std::size_t>(state.params()));
  }
  rec.loss = net.take_mean_loss();  // the step's one read from the device (fp16 also reads its overflow flag)

  alloc.mark_phase({fmt::format("step {}, optimizer step", rec.step), rec.step, config.grad_accum - 1, "optimizer", 0, 0});
  const tensor& grads = state.grads_accum ? state.grads_accum : state.grads;
  const std::size_t n = static_cast<std::size_t>(state.params());
  tensor non_finite_flag;  // fp16: raised by the overflow check, read before the update
  if (layout.loss_scaling) non_finite_flag = net.act("optimizer.non_finite_flag");
  if (layout.loss_scaling && alloc.ops().has_non_finite(grads.view(), non_finite_flag.view(), n)) {
    rec.skipped = true;  // GradScaler: skip the update, halve the scale (backoff_factor 0.5)
    loss_scale_ *= 0.5f;
    good_steps_ = 0;
  } else {
    state.ensure_optimizer_state();
    const tensor& params = state.master ? state.master : state.weights;
    const kernels::view copy = state.master ? state.weights.view() : kernels::view{};
    const int optimizer_step = static_cast<int>(std::count_if(records.begin(), records.end(),
                                                              [](const step_record& r) { return !r.skipped; })) + 1;
    alloc.ops().adamw_step(options.adamw, optimizer_step, params.view(), grads.view(), 1.0f / loss_scale_,
                        state.adam_m.view(), state.adam_v.view(), copy, n);
    if (layout.loss_scaling && ++good_steps_ == options.loss_scale_growth_interval) {
      loss_scale_ *= 2.0f;  // growth_factor 2 after growth_interval clean steps
      good_steps_ = 0;
    }
  }
  state.release_grads();
  records.push_back(rec);
  return rec;
}

void training_run::run() {
  for (int i = 0; i < options.steps || (!reached_steady_state() && i < options.steps + max_extra_steps); ++i) step();
}

int training_run::first_applied_step() const {
  for (const step_record& r : records)
    if (!r.skipped) return r.step;
  return 0;
}

bool training_run::reached_steady_state() const {
  const int first = first_applied_step();
  return first > 0 && static_cast<int>(records.size()) > first;
}

}  // namespace trainplan::validate
