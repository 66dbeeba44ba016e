#include "planner/profiles/build_inventory.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "planner/model/model_facts.hpp"
#include "planner/profiles/hf/activations_hf.hpp"
#include "planner/util/checked_math.hpp"
#include "planner/memory/inventory_builder.hpp"
#include "planner/profiles/llmc/inventory_llmc.hpp"
#include "planner/run/lora.hpp"
#include "planner/run/moe.hpp"
#include "planner/run/optimizer.hpp"
#include "planner/model/param_count.hpp"

namespace trainplan {

namespace {

// Static names of the model-state buffers, so that tensor_spec can hold a string_view.
std::string_view state_buffer_name(std::string_view kind, dtype t) {
  static constexpr std::string_view weights[] = {"weights.fp32", "weights.tf32", "weights.bf16", "weights.fp16",
                                                 "weights.fp8", "weights.u8", "weights.i32", "weights.i64"};
  static constexpr std::string_view master[] = {"master.fp32", "master.tf32", "master.bf16", "master.fp16",
                                                "master.fp8", "master.u8", "master.i32", "master.i64"};
  static constexpr std::string_view grads[] = {"grads.fp32", "grads.tf32", "grads.bf16", "grads.fp16",
                                               "grads.fp8", "grads.u8", "grads.i32", "grads.i64"};
  const auto i = static_cast<std::size_t>(t);
  return kind == "weights" ? weights[i] : kind == "master" ? master[i] : grads[i];
}

}  // namespace

namespace {

inventory finish_inventory(inventory out, const model_spec& m) {
  out.layers = m.layers;
  out.dense_layers = m.is_moe() ? m.dense_layers : 0;
  out.events_per_micro_batch = 2 * static_cast<std::int64_t>(m.layers) + 5;
  // One layer's: the last layer's (an MoE layer, when DeepSeek's dense first layers differ from it).
  const std::uint32_t last_layer = static_cast<std::uint32_t>(m.layers - 1);
  for (const tensor_spec& t : out.tensors)
    if (t.per_layer && t.kept_to_backward && t.category == tensor_category::activations) {
      if (t.layer_begin <= last_layer && last_layer < t.layer_end)
        out.activations_per_layer_bytes = checked_add(out.activations_per_layer_bytes, t.bytes, "activation bytes");
      out.activations_all_layers_bytes =
          checked_add(out.activations_all_layers_bytes, checked_mul(t.bytes, t.instances(), "activation bytes"), "activation bytes");
    }
  return out;
}

}  // namespace

namespace {

// `f` with the vocabulary tables it holds (the token embedding, an untied head or a pipeline stage's copy of a
// tied one) padded from m.vocab to `rows` rows (vocab_rows): what a framework that pads stores and trains.
// The counts the report shows come from describe_model, unpadded; these feed the inventory alone.
model_facts with_padded_vocab_tables(model_facts f, const model_spec& m, std::uint64_t rows) {
  const char* what = "padded vocabulary";
  const std::uint64_t extra = checked_mul(rows - m.vocab, m.hidden, what);
  for (param_tensor& t : f.tensors) {
    const bool embed = t.name == "embed.tokens";
    if (!embed && t.name != "lm_head.weight") continue;
    t.shape[0] = rows;
    t.count = checked_add(t.count, extra, what);
    t.active = checked_add(t.active, extra, what);
    (embed ? f.counts.embedding : f.counts.lm_head) += extra;
    f.counts.total = checked_add(f.counts.total, extra, what);
    f.counts.active = checked_add(f.counts.active, extra, what);
  }
  return f;
}

// What trainplan's own kernels need beyond the tensors of the model, allocated by name like every other
// buffer so that the harness's memory identity stays exact (issue 11: no device memory outside the
// tracker). Sizes follow the kernels (kernels/norm.hpp, embedding.hpp, cross_entropy.hpp, adamw.hpp).
void add_harness_scratch(inventory_builder& inv, const model_spec& m, const run_config& run, const pipeline_stage& stage) {
  const std::uint64_t b = run.micro_batch, s = run.seq, h = m.hidden, rows = checked_mul(b, s, "tokens");
  // The norms' weight (and bias) gradients: each thread block sums its rows into its own fp32 row, and a
  // second pass adds the rows into the gradients; no atomics, the same sum every run.
  const std::uint64_t norm_params = m.family == model_family::gpt ? 2 : 1;
  inv.span("bwd.norm_partials", {std::min(rows, harness_norm_partial_rows), norm_params * h}, dtype::fp32,
           tensor_category::activation_grads, event_kind::bwd_head, event_kind::bwd_embed);
  // The embedding gradients summed in fp32, then added to the stored ones once (rounded once): the V rows of
  // real tokens only, the padded rows get no gradient (vocab_rows).
  if (stage.first)
    inv.span("bwd.embed_grad_fp32", {checked_mul(m.vocab + (m.max_positions > 0 ? s : 0), h, "embedding gradient")},
             dtype::fp32, tensor_category::activation_grads, event_kind::bwd_embed, event_kind::bwd_embed);
  // Each token's loss, summed over the step's micro-batches on the device and read once after the last.
  if (stage.last)
    inv.model_state("loss.token_losses", rows, dtype::fp32, tensor_category::logits, state_lifetime::whole_run,
                    tensor_role::data);
  // fp16's loss scaling: the flag the non-finite check raises, read before the optimizer step.
  if (run.precision == precision_regime::fp16_mixed)
    inv.model_state("optimizer.non_finite_flag", 1, dtype::i32, tensor_category::optimizer, state_lifetime::optimizer_only,
                    tensor_role::data);
}

// AccumulateGrad (torch/csrc/autograd/functions/accumulate_grad.h, accumulateGrad): while .grad is undefined
// (a step's first micro-batch, after zero_grad(set_to_none=True)) it steals the incoming gradient, which is
// then the .grad the hf gradients above stand for; once .grad exists (later micro-batches) it adds the
// incoming one in place and drops it. The incoming gradients of a layer's weights come and go one at a
// time; the token table's is as large as the vocabulary: embedding_dense_backward's new [V, h] gradient,
// added to .grad in later micro-batches, and with tied embeddings added in every micro-batch to the head's
// contribution, which the engine holds in the node's input buffer from the head's backward until then
// (torch/csrc/autograd/input_buffer.cpp, accumulate: old_var.add_(var)). In the first micro-batch that
// held contribution becomes .grad (grads.head); in later ones it is one more table beside it.
void add_hf_incoming_table_grads(inventory_builder& inv, const model_spec& m, dtype grads) {
  const std::uint64_t table = checked_mul(m.vocab, m.hidden, "embedding gradient");
  inv.span("grads.embedding.incoming", {table}, grads, tensor_category::gradients, event_kind::bwd_embed,
           event_kind::bwd_embed)
      .lifetime = m.tied_embeddings ? state_lifetime::micro_batch : state_lifetime::later_micro_batches;
  if (m.tied_embeddings)
    inv.span("grads.head.incoming", {table}, grads, tensor_category::gradients, event_kind::bwd_layer,
             event_kind::bwd_embed, static_cast<std::int64_t>(m.layers) - 1)
        .lifetime = state_lifetime::later_micro_batches;
}

// torch.amp.GradScaler (torch/amp/grad_scaler.py): its scale (fp32) and growth tracker (int32) are 0-dim
// tensors the first scale(loss) creates and the scaler keeps; unscale_ makes inv_scale and found_inf within
// step() (and _MultiDeviceReplicator a copy of each), dropped by update(). Unscaling itself is in place
// (_amp_foreach_non_finite_check_and_unscale_): no per-parameter buffer.
void add_grad_scaler_state(inventory_builder& inv) {
  inv.model_state("grad_scaler.scale", 1, dtype::fp32, tensor_category::optimizer, state_lifetime::whole_run,
                  tensor_role::data);
  inv.model_state("grad_scaler.growth_tracker", 1, dtype::i32, tensor_category::optimizer, state_lifetime::whole_run,
                  tensor_role::data);
  for (std::string_view name : {"grad_scaler.inv_scale", "grad_scaler.found_inf"})
    inv.model_state(name, 2, dtype::fp32, tensor_category::optimizer, state_lifetime::optimizer_only, tensor_role::data);
}

}  // namespace

inventory build_inventory(const model_spec& m, const run_config& run, const precision_layout& layout,
                          const model_facts* facts, const pipeline_stage& stage) {
  if (run.framework == framework_kind::llmc) return build_llmc_inventory(m, run, layout);
  const std::uint64_t b = run.micro_batch, s = run.seq, h = m.hidden, a = m.heads, f = m.ffn, V = m.vocab;
  const std::uint64_t qkv = m.qkv_width(), hq = m.out_width();  // hq: the attention output's width
  const dtype act = layout.activations;
  const dtype gemm_in = layout.gemm_input_saved.value_or(act);  // fp8 saves GEMM inputs in fp8
  const bool dropout = run.dropout > 0.0;
  const bool eager = run.attention == attention_kind::eager;
  const bool keep_layer = run.recompute != recompute_mode::full;
  const bool keep_core = run.recompute == recompute_mode::none;  // the attention core (s^2 buffers)
  inventory out;
  out.tensors.reserve(64);  // one allocation per configuration: sweeps evaluate millions
  inventory_builder inv(static_cast<std::int64_t>(m.layers), out.tensors);
  inv.set_inflight(stage.inflight);

  // ---- model state -------------------------------------------------------------------------------
  model_facts local;
  if (!facts) {
    local = describe_model(m);
    facts = &local;
  }
  // The harness pads the vocabulary tables as llm.c does (vocab_rows): the model state grows by their padded
  // rows, and the logits are that wide; V stays the number of classes.
  const std::uint64_t V_rows = vocab_rows(m, vocab_pad_multiple(run.framework));
  if (V_rows != V) {
    local = with_padded_vocab_tables(*facts, m, V_rows);
    facts = &local;
  }
  const param_counts& pc = facts->counts;
  // Sharding (ZeRO, Rajbhandari et al. 2020, Fig. 1): stage 1 partitions the optimizer states (with the
  // fp32 master copy, part of "K" in the paper), stage 2 also the gradients, stage 3 also the weights,
  // each over the data-parallel degree. Tensor parallelism first splits every parameter by tp (norm
  // weights are split too here; they are under 0.1% of a model).
  const std::uint64_t tp = run.tp, dp = run.data_parallel();
  const std::uint64_t w_div = run.zero >= 3 ? dp : 1, g_div = run.zero >= 2 ? dp : 1, o_div = run.zero >= 1 ? dp : 1;
  auto share = [](std::uint64_t n, std::uint64_t parts) { return (n + parts - 1) / parts; };
  const bool offload_optimizer = run.offload == offload_mode::optimizer || run.offload == offload_mode::both;
  const bool offload_params = run.offload == offload_mode::params || run.offload == offload_mode::both;
  auto place = [&](bool on_host) { return on_host ? &out.host_tensors : &out.tensors; };
  auto state = [&](bool on_host, std::string_view name, std::uint64_t elements, dtype type, tensor_category cat,
                   state_lifetime life, tensor_role role, param_scope scope) {
    inventory_builder target(static_cast<std::int64_t>(m.layers), *place(on_host));
    target.model_state(name, elements, type, cat, life, role, scope);
  };

  const bool adapters = run.finetune != finetune_kind::full;
  const bool hf = run.framework == framework_kind::hf;
  // The dtypes of what trains. peft keeps LoRA adapters in fp32 whatever the base's dtype
  // (get_peft_model's autocast_adapter_dtype=True upcasts a 16-bit base's adapters: peft's
  // cast_adapter_dtype), so under hf their gradients and AdamW state are fp32 too, with no master copy;
  // unless the model is cast after get_peft_model (run.lora_fp32 false: the model's dtype).
  precision_layout trained_layout = layout;
  if (hf && adapters) {
    trained_layout.weights = trained_layout.grads = trained_layout.optimizer_state =
        run.lora_fp32 ? dtype::fp32 : layout.weights;
    trained_layout.master.reset();
    trained_layout.grad_accum.reset();
  }
  // The frozen base: the model's own dtype under hf (an fp32 model under autocast, bf16 under --precision
  // bf16); the other profiles load it in bf16.
  const dtype base_type = adapters && !hf ? dtype::bf16 : layout.weights;
  const std::uint64_t P = share(pc.total, tp);
  // Expert parallelism (run.ep): each GPU holds experts/ep of each layer's routed experts. A state ZeRO
  // shards over the dp data-parallel GPUs is 1/dp of the model either way (Megatron-Core shards the
  // experts' over the dp/ep GPUs that hold the same experts: (E/ep)/(dp/ep) = E/dp); an unsharded one
  // holds every other weight and 1/ep of the experts. Adapters never sit on the experts here.
  const std::uint64_t expert_params = share(pc.routed_experts, tp);
  auto shard = [&](std::uint64_t all, std::uint64_t div) {
    if (div > 1 || run.ep <= 1 || adapters) return share(all, div);
    return all - expert_params + expert_params / run.ep;
  };
  // Weights this GPU computes with, out of `elements` that hold `experts` routed-expert weights (split by tp).
  auto local_weights = [&](std::uint64_t elements, std::uint64_t experts) { return elements - experts + experts / run.ep; };
  const std::uint64_t layer_experts = share(pc.routed_experts_per_layer, tp);
  // The GEMM weights of the largest layer this GPU computes with: an MoE layer's local experts, or one of
  // DeepSeek's dense first layers (larger once --ep spreads the experts).
  const std::uint64_t largest_layer_matmul =
      std::max(local_weights(share(pc.matmul_per_layer, tp), layer_experts), share(pc.matmul_per_dense_layer, tp));
  // What the optimizer updates: every weight, or the LoRA adapters (split by tp like their layers).
  const std::uint64_t trainable = adapters ? share(lora_params(m, run.lora_rank, run.lora_targets, run.framework), tp) : P;
  if (run.finetune == finetune_kind::qlora) {
    // QLoRA quantizes the layers' linear weights to NF4; embeddings, norms and the head stay bf16.
    const std::uint64_t linear = share(pc.matmul_layers_total, tp);
    state(offload_params, "weights.nf4", share(nf4_bytes(linear), w_div), dtype::u8, tensor_category::weights,
          state_lifetime::whole_run, tensor_role::frozen_weights, param_scope::none);
    state(offload_params, "weights.bf16", share(P - linear, w_div), dtype::bf16, tensor_category::weights,
          state_lifetime::whole_run, tensor_role::frozen_weights, param_scope::none);
    // One layer's weights dequantized to bf16 for its GEMMs at a time.
    inv.model_state("qlora.dequant", largest_layer_matmul, dtype::bf16, tensor_category::weights,
                    state_lifetime::whole_run, tensor_role::frozen_weights);
  } else {
    state(offload_params, state_buffer_name("weights", base_type), shard(P, w_div), base_type, tensor_category::weights, state_lifetime::whole_run,
          adapters ? tensor_role::frozen_weights : tensor_role::trained_weights, param_scope::all);
  }
  // DeepSeek-V3's per-expert routing bias in each MoE layer: an fp32 buffer, updated by the balancing rule
  // rather than the optimizer (HF e_score_correction_bias).
  if (m.router_score_bias && m.moe_layers() > 0)
    inv.model_state("moe.router_score_bias", checked_mul(m.experts, m.moe_layers(), "routing bias"), dtype::fp32,
                    tensor_category::weights, state_lifetime::whole_run, tensor_role::frozen_weights);
  // Each adapter is its own PyTorch tensor, and so is its gradient and each optimizer state: the allocator
  // replay allocates them one by one (most are under 1 MiB: PyTorch's small pool), where they are unsharded.
  if (adapters) {
    out.adapter_layer_tensors = lora_layer_tensors(m, run.lora_rank, run.lora_targets, run.framework);
    out.adapter_qkv_modules = lora_qkv_modules(m, run.lora_targets, run.framework);
  }
  const param_scope adapter_scope = adapters ? param_scope::adapters : param_scope::all;
  if (adapters)
    inv.model_state("lora.weights", share(trainable, w_div), trained_layout.weights, tensor_category::weights,
                    state_lifetime::whole_run, tensor_role::trained_weights, param_scope::adapters);
  if (trained_layout.master)
    state(offload_optimizer, adapters ? std::string_view("lora.master.fp32") : state_buffer_name("master", *layout.master),
          shard(trainable, o_div), *layout.master, tensor_category::master_weights, state_lifetime::whole_run,
          tensor_role::master_weights, adapter_scope);
  if (layout.fp8_weight_cache) {
    // Only GEMM weights are cast: the layers' matmul weights, and the head unless it is tied (TE keeps
    // the embedding table in bf16; a tied head is cast on the fly).
    const std::uint64_t gemm = local_weights(
        share(checked_add(pc.matmul_layers_total, pc.lm_head, "fp8 cache"), tp), expert_params);
    inv.model_state("weights.fp8", gemm, dtype::fp8, tensor_category::weights, state_lifetime::whole_run,
                    tensor_role::frozen_weights);
    inv.model_state("weights.fp8_t", gemm, dtype::fp8, tensor_category::weights, state_lifetime::whole_run,
                    tensor_role::frozen_weights);
  }
  // PyTorch creates each parameter's .grad when its backward runs (hf): a layer's gradients appear at its
  // backward, the head's right after the loss, the embedding's last; so do peft's adapters' (E13's recorded
  // allocator history, data/measurements/: each layer's lora_A and lora_B gradients made as its backward runs).
  // Sharded gradients keep the one buffer of the other frameworks.
  const std::int64_t bwd0 = event_index(event_kind::bwd_layer, 0, static_cast<std::int64_t>(m.layers));
  if (hf && adapters && run.zero < 2 && !out.adapter_layer_tensors.empty()) {
    std::uint64_t layer_adapters = 0;
    for (std::uint64_t e : out.adapter_layer_tensors) layer_adapters = checked_add(layer_adapters, e, "LoRA gradients");
    tensor_spec& t = inv.model_state("layer{}.lora.grads", layer_adapters, trained_layout.grads, tensor_category::gradients,
                                     state_lifetime::gradient_from_backward, tensor_role::gradients, param_scope::layer_adapters);
    inv.per_layer(t);
    t.intervals[0] = {bwd0, -1, 0, 0};
  } else if (hf && !adapters && run.zero < 2) {
    auto grad = [&](std::string_view name, std::uint64_t elements, param_scope scope, std::int64_t first_base,
                    std::int64_t first_step) {
      tensor_spec& t = inv.model_state(name, elements, layout.grads, tensor_category::gradients,
                                       state_lifetime::gradient_from_backward, tensor_role::gradients, scope);
      if (scope == param_scope::layer) inv.per_layer(t);
      t.intervals[0] = {first_base, first_step, 0, 0};
    };
    const std::int64_t L = static_cast<std::int64_t>(m.layers);
    if (m.dense_layers > 0) {  // DeepSeek's dense first layers have gradients of their own size
      inv.set_layer_range(0, m.dense_layers);
      grad("layer{}.grads", pc.per_dense_layer, param_scope::layer, bwd0, -1);
      inv.set_layer_range(m.dense_layers, m.layers);
    }
    grad("layer{}.grads", pc.per_layer, param_scope::layer, bwd0, -1);
    inv.all_layers();
    // Tied embeddings: the head's backward creates the embedding's gradient.
    grad("grads.head", pc.final_norm + pc.lm_head + (m.tied_embeddings ? pc.embedding : 0), param_scope::head,
         event_index(event_kind::bwd_layer, L - 1, L), 0);
    if (!m.tied_embeddings)
      grad("grads.embedding", pc.embedding, param_scope::embedding, event_index(event_kind::bwd_embed, 0, L), 0);
    add_hf_incoming_table_grads(inv, m, layout.grads);
  } else {
    state(false, adapters ? std::string_view("lora.grads") : state_buffer_name("grads", layout.grads), shard(trainable, g_div),
          trained_layout.grads, tensor_category::gradients, state_lifetime::backward_to_optimizer, tensor_role::gradients,
          adapter_scope);
  }
  if (trained_layout.grad_accum)
    state(offload_optimizer, adapters ? std::string_view("lora.grads.fp32") : state_buffer_name("grads", *layout.grad_accum),
          shard(trainable, g_div), *layout.grad_accum, tensor_category::gradients, state_lifetime::backward_to_optimizer,
          tensor_role::gradients, adapter_scope);
  // Optimizer state over what trains; adapters are counted as one matrix per the optimizer's rules.
  std::vector<param_tensor> adapter_tensors;
  if (adapters) adapter_tensors.push_back({"lora", {trainable}, trainable, false, true});
  const std::vector<param_tensor>& trained = adapters ? adapter_tensors : facts->tensors;
  const layer_counts layers_of_trained = adapters ? layer_counts(1) : facts->layers;
  // The routed experts' part of each state buffer, for expert parallelism without ZeRO-1 (see shard).
  std::vector<param_tensor> expert_tensors;
  if (run.ep > 1 && o_div == 1 && !adapters)
    for (const param_tensor& t : facts->tensors)
      if (t.routed_expert) expert_tensors.push_back(t);
  const optimizer_state_buffers expert_states =
      expert_tensors.empty() ? optimizer_state_buffers{}
                             : optimizer_state(run.optimizer, expert_tensors, layers_of_trained, layout.optimizer_state);
  std::size_t state_index = 0;
  for (const optimizer_state_buffer& st : optimizer_state(run.optimizer, trained, layers_of_trained, trained_layout.optimizer_state)) {
    std::uint64_t bytes = share(share(st.bytes, adapters ? 1 : tp), o_div);
    if (!expert_tensors.empty() && state_index < expert_states.size()) {
      const std::uint64_t experts_bytes = share(expert_states.buffers[state_index].bytes, tp);
      bytes = bytes - experts_bytes + experts_bytes / run.ep;
    }
    ++state_index;
    std::vector<tensor_spec>& target = *place(offload_optimizer);
    inventory_builder b(static_cast<std::int64_t>(m.layers), target);
    const param_scope scope = adapter_scope;
    tensor_spec& t = b.add(st.name, {bytes / dtype_bytes(st.type)}, st.type, tensor_category::optimizer);
    t.bytes = bytes;  // adamw-8bit carries block scales beyond one byte per element
    t.lifetime = state_lifetime::from_first_optimizer;
    t.role = tensor_role::optimizer_state;
    t.scope = scope;
    // PyTorch's foreach AdamW (torch/optim/adam.py, _multi_tensor_adam) computes sqrt(v) into new tensors
    // for every parameter at once: a temporary as large as the second moment during the step.
    if (hf && st.name == "adam.v" && run.optimizer_impl == optimizer_impl_kind::foreach_impl) {
      // This add may move the vector's storage: `t` must not be used after it.
      tensor_spec& tmp = b.add("adam.foreach_sqrt_v", {bytes / dtype_bytes(st.type)}, st.type, tensor_category::optimizer);
      tmp.bytes = bytes;
      tmp.lifetime = state_lifetime::optimizer_only;
      tmp.role = tensor_role::optimizer_temporary;
      tmp.scope = scope;
    }
  }
  // Communication buffers. Data parallelism without ZeRO-3 all-reduces (or reduce-scatters) gradients in
  // buckets (PyTorch DDP's bucket_cap_mb = 25). ZeRO-3/FSDP all-gathers each layer's weights before use and
  // prefetches the next one, and reduce-scatters its gradients through a bucket of one layer.
  const std::uint64_t layer_params =
      std::max(local_weights(share(pc.per_layer, tp), layer_experts), share(pc.per_dense_layer, tp));  // the largest layer
  if (dp > 1 && run.zero < 3)
    inv.model_state("ddp.grad_bucket", (25ull << 20) / dtype_bytes(layout.grads), layout.grads, tensor_category::gradients,
                    state_lifetime::backward_to_optimizer, tensor_role::communication);
  if (dp > 1 && run.zero >= 3) {
    inv.model_state("zero3.gathered_weights", checked_mul(2, layer_params, "gather buffer"), base_type,
                    tensor_category::weights, state_lifetime::whole_run, tensor_role::communication);
    inv.model_state("zero3.reduce_bucket", adapters ? share(trainable, m.layers) : layer_params, layout.grads,
                    tensor_category::gradients, state_lifetime::backward_to_optimizer, tensor_role::communication);
  }

  // Tensor parallelism (Korthikanti et al. 2022, Table 2): the attention heads, the MLP width and the
  // vocabulary split across tp GPUs; the layer's other tensors (norm inputs and outputs, dropout masks:
  // the "10sbh") stay whole, unless sequence parallelism splits them along the sequence.
  const std::uint64_t a_tp = share(a, tp), qkv_tp = share(qkv, tp), hq_tp = share(hq, tp), f_tp = share(f, tp),
                      V_tp = share(V_rows, tp), s_rep = run.sequence_parallel ? share(s, tp) : s;

  if (hf) {
    check_hf_run(run, layout);
    if (layout.loss_scaling) add_grad_scaler_state(inv);
    out.forward_in_program_order = add_hf_activations(inv, m, run, layout, pc, out.backward_programs);
    return finish_inventory(std::move(out), m);
  }

  // ---- embedding -----------------------------------------------------------------------------------
  // The embedding's input and dropout mask, kept to its backward: one per micro-batch in flight on the first GPU.
  const std::uint64_t b_embed = checked_mul(b, stage.embedding_inflight, "activations in flight");
  if (stage.first)
    inv.span("batch.tokens", {b_embed, s}, dtype::i32, tensor_category::activations, event_kind::fwd_embed, event_kind::bwd_embed);
  if (stage.last)
    inv.span("batch.targets", {b, s}, dtype::i32, tensor_category::activations, event_kind::fwd_embed, event_kind::loss);
  if (dropout && stage.first)  // dropout on the embedding sum; its backward needs the mask
    inv.span("embed.dropout_mask", {b_embed, s, h}, dtype::u8, tensor_category::activations, event_kind::fwd_embed,
             event_kind::bwd_embed);

  // ---- one transformer layer (Korthikanti et al. 2022, Sec. 4.1, per-layer accounting) --------------
  // Residual stream entering the layer = input of the first norm; written by the previous layer.
  inv.layer("layer{}.ln1.in", {b, s_rep, h}, act, true, /*is_layer_input=*/true);  // 2sbh
  inv.layer("layer{}.attn.qkv_in", {b, s_rep, h}, gemm_in, keep_layer);           // 2sbh: norm output, QKV GEMM input
  if (m.is_mla()) {
    // Multi-head latent attention (Megatron-Core MLASelfAttention): the down projections' outputs, which
    // their RMSNorms save (the kv one with the RoPE key beside the latent), and the normed latents the up
    // projections read. The latents are not split by tp (each rank computes them whole).
    if (m.q_lora_rank > 0) {
      inv.layer("layer{}.attn.q_a", {b, s, m.q_lora_rank}, act, keep_layer);
      inv.layer("layer{}.attn.q_b_in", {b, s, m.q_lora_rank}, gemm_in, keep_layer);
    }
    inv.layer("layer{}.attn.kv_a", {b, s, m.kv_lora_rank + m.rope_head_dim}, act, keep_layer);
    inv.layer("layer{}.attn.kv_b_in", {b, s, m.kv_lora_rank}, gemm_in, keep_layer);
  }
  inv.layer("layer{}.attn.qkv", {b, s, qkv_tp}, act, keep_layer);                // 6sbh for MHA: Q, K (QK^T) and V
  if (eager) {
    inv.layer("layer{}.attn.softmax", {b, a_tp, s, s}, act, keep_layer && keep_core);  // 2as^2b
    if (dropout) {
      inv.layer("layer{}.attn.softmax_dropout_mask", {b, a_tp, s, s}, dtype::u8, keep_layer && keep_core);  // as^2b
      inv.layer("layer{}.attn.softmax_dropout", {b, a_tp, s, s}, act, keep_layer && keep_core);             // 2as^2b
    }
  } else {
    // Flash attention saves the fp32 log-sum-exp of each row (Dao et al. 2022, Alg. 2) and regenerates
    // its dropout mask from the RNG state, so nothing of size s^2 is kept.
    inv.layer("layer{}.attn.lse", {b, a_tp, s}, dtype::fp32, keep_layer);
  }
  inv.layer("layer{}.attn.out_in", {b, s, hq_tp}, gemm_in, keep_layer);  // 2sbh: attention output, out-proj input
  if (dropout) inv.layer("layer{}.attn.dropout_mask", {b, s_rep, h}, dtype::u8, keep_layer);  // sbh
  inv.layer("layer{}.ln2.in", {b, s_rep, h}, act, keep_layer);                                // 2sbh
  inv.layer("layer{}.mlp.fc_in", {b, s_rep, h}, gemm_in, keep_layer);                         // 2sbh
  if (m.family == model_family::gpt) {
    inv.layer("layer{}.mlp.gelu_in", {b, s, f_tp}, act, keep_layer);      // 8sbh at f = 4h
    inv.layer("layer{}.mlp.proj_in", {b, s, f_tp}, gemm_in, keep_layer);  // 8sbh: GELU output
  } else if (!m.is_moe() || m.dense_layers > 0) {
    // DeepSeek-V3's dense first layers hold a dense MLP of their own width; the MoE layers after them, below.
    if (m.is_moe()) inv.set_layer_range(0, m.dense_layers);
    const std::uint64_t fd_tp = share(m.dense_mlp_width(), tp);
    inv.layer("layer{}.mlp.gate", {b, s, fd_tp}, act, keep_layer);         // SwiGLU backward needs gate and up
    inv.layer("layer{}.mlp.up", {b, s, fd_tp}, act, keep_layer);
    inv.layer("layer{}.mlp.down_in", {b, s, fd_tp}, gemm_in, keep_layer);  // silu(gate) * up
  }
  if (m.is_moe()) {
    inv.set_layer_range(m.dense_layers, m.layers);
    // Mixture of Experts (Megatron-Core MoELayer with the all-to-all dispatcher): the router's fp32
    // probabilities (softmax's backward needs them) and the top-k choice and weights; the tokens permuted
    // to their experts (the experts' GEMM input); each expert's SwiGLU intermediates for the rows it gets;
    // and the expert outputs, which the combine's backward multiplies into the gradient of the weights.
    // Rows: planner/run/moe.hpp (k x b x s dropless, padded to the capacity otherwise).
    const std::uint64_t T = checked_mul(b, s, "tokens"), R = routed_rows(m, run), k = m.experts_per_token;
    inv.layer("layer{}.moe.router_probs", {T, m.experts}, dtype::fp32, keep_layer);
    inv.layer("layer{}.moe.topk_indices", {T, k}, dtype::i64, keep_layer);
    inv.layer("layer{}.moe.topk_weights", {T, k}, dtype::fp32, keep_layer);
    inv.layer("layer{}.moe.permuted_in", {R, h}, gemm_in, keep_layer);
    inv.layer("layer{}.mlp.gate", {R, f_tp}, act, keep_layer);
    inv.layer("layer{}.mlp.up", {R, f_tp}, act, keep_layer);
    inv.layer("layer{}.mlp.down_in", {R, f_tp}, gemm_in, keep_layer);
    inv.layer("layer{}.moe.expert_out", {R, h}, act, keep_layer);
    if (run.ep > 1) {
      // All-to-all (Megatron-Core MoEAlltoAllTokenDispatcher): the permuted rows go to the GPUs that hold
      // their experts and the expert outputs come back, a send and a receive buffer of R rows each, in the
      // layer's forward and again in its backward (balanced routing: each GPU receives as many as it sends).
      const std::int64_t fwd0 = inv.fwd_layer0(), bwd0 = inv.bwd_layer0();
      inv.layer_intervals("layer{}.moe.all_to_all", {2, R, h}, act, tensor_category::activations,
                          {{fwd0, 1, fwd0, 1}, {bwd0, -1, bwd0, -1}});
    }
    if (m.shared_expert_ffn > 0) {  // Qwen2-MoE's and DeepSeek's shared experts: a dense SwiGLU over every token
      const std::uint64_t fs_tp = share(m.shared_expert_ffn, tp);
      inv.layer("layer{}.moe.shared.gate", {b, s, fs_tp}, act, keep_layer);
      inv.layer("layer{}.moe.shared.up", {b, s, fs_tp}, act, keep_layer);
      inv.layer("layer{}.moe.shared.down_in", {b, s, fs_tp}, gemm_in, keep_layer);
    }
    inv.all_layers();
  }
  if (dropout) inv.layer("layer{}.mlp.dropout_mask", {b, s_rep, h}, dtype::u8, keep_layer);  // sbh
  if (layout.autocast_weight_cache) {
    // Each layer's GEMM weights, cast: a dense layer's, or an MoE layer's with its local experts
    // (DeepSeek's dense first layers and its MoE layers differ).
    auto cache = [&](std::uint64_t first, std::uint64_t end, std::uint64_t elements) {
      inv.set_layer_range(first, end);
      inv.layer("layer{}.autocast.weights", {elements}, dtype::bf16, keep_layer, false, tensor_category::weights).role =
          tensor_role::frozen_weights;
    };
    if (!m.is_moe()) cache(0, m.layers, share(pc.matmul_per_layer, tp));
    if (m.dense_layers > 0) cache(0, m.dense_layers, share(pc.matmul_per_dense_layer, tp));
    if (m.is_moe()) cache(m.dense_layers, m.layers, local_weights(share(pc.matmul_per_layer, tp), layer_experts));
    inv.all_layers();
  }

  // ---- head and loss -------------------------------------------------------------------------------
  const std::int64_t last_layer = static_cast<std::int64_t>(m.layers) - 1;
  if (!stage.last) {
    // A stage before the last sends its output on and frees it (Megatron deallocates the output tensor).
    inv.span("pipeline.output", {b, s_rep, h}, act, tensor_category::activations, event_kind::fwd_layer,
             event_kind::fwd_head, last_layer);
  } else {
  inv.span("final_norm.in", {b, s, h}, act, tensor_category::activations, event_kind::fwd_layer, event_kind::bwd_head,
           last_layer);
  inv.span("lm_head.in", {b, s, h}, gemm_in, tensor_category::activations, event_kind::fwd_head, event_kind::bwd_head);
  if (layout.autocast_weight_cache)
    inv.span("lm_head.autocast.weight", {V_tp, h}, dtype::bf16, tensor_category::weights, event_kind::fwd_head,
             event_kind::bwd_head)
        .role = tensor_role::frozen_weights;
  if (run.framework == framework_kind::trainplan) {
    // The harness's fused classifier (llm.c's): softmax and cross-entropy in fp32 registers, the logits'
    // gradient written over the logits, which live on into the head's backward. V_rows wide (llm.c's padded
    // vocabulary); the padded columns get zero gradient and never enter the loss.
    inv.span("logits", {b, s, V_tp}, act, tensor_category::logits, event_kind::fwd_head, event_kind::bwd_head);
  } else {
    inv.span("logits", {b, s, V_tp}, act, tensor_category::logits, event_kind::fwd_head, event_kind::loss);
    // Megatron's loss runs on an fp32 copy of the logits (vocab_parallel_cross_entropy upcasts them).
    if (act != dtype::fp32)
      inv.span("logits.fp32", {b, s, V_tp}, dtype::fp32, tensor_category::logits, event_kind::loss, event_kind::loss);
    inv.span("logits.grad", {b, s, V_tp}, act, tensor_category::logits, event_kind::loss, event_kind::bwd_head);
  }
  }

  // ---- activation gradients (reused across layers, as llm.c does) -----------------------------------
  auto bwd_buffer = [&](std::string_view name, tensor_shape shape) {
    inv.span(name, shape, act, tensor_category::activation_grads, event_kind::bwd_head, event_kind::bwd_embed);
  };
  bwd_buffer("bwd.d_residual", {b, s, h});  // gradient flowing down the residual stream
  bwd_buffer("bwd.d_hidden", {b, s, h});    // gradient of a sub-block's input or output
  bwd_buffer("bwd.d_qkv", {b, s, qkv_tp});
  if (m.is_mla())  // the latents' gradients, on their way back through the up and down projections
    bwd_buffer("bwd.d_latent", {b, s, m.q_lora_rank + m.kv_lora_rank + m.rope_head_dim});
  // d_ffn holds the MLP's inner gradients (gate and up for SwiGLU), and, once the MLP is done, the
  // gradient of the attention output: it is as wide as the larger of the two.
  const std::uint64_t ffn_grad_width = m.family == model_family::llama ? checked_mul(2, f, "d_ffn") : f;
  if (!m.is_moe()) {
    bwd_buffer("bwd.d_ffn", {b, s, std::max(share(ffn_grad_width, tp), hq_tp)});
  } else {  // the experts' rows instead of the tokens (and the shared expert's, when wider)
    const std::uint64_t experts_grad = checked_mul(routed_rows(m, run), share(ffn_grad_width, tp), "d_ffn");
    // Over the tokens: the shared expert's, a dense first layer's (DeepSeek) or the attention output's.
    const std::uint64_t token_width = std::max({share(2 * m.shared_expert_ffn, tp), hq_tp,
                                                m.dense_layers > 0 ? share(2 * m.dense_mlp_width(), tp) : 0});
    const std::uint64_t tokens_grad = checked_product({b, s, token_width}, "d_ffn");
    bwd_buffer("bwd.d_ffn", {std::max(experts_grad, tokens_grad)});
    // The experts' rows' gradient, (R, h): of the expert outputs (the combine's backward) until the down
    // GEMMs' backward reads it, then of the permuted inputs (the gate/up GEMMs' backward, while d_ffn
    // still holds d_gate and d_up) until the permutation's backward adds it to the tokens. Megatron's
    // autograd allocates these two in turn; the harness reuses one buffer for every layer.
    bwd_buffer("bwd.d_expert_rows", {routed_rows(m, run), h});
  }
  if (eager) bwd_buffer("bwd.d_scores", {b, a_tp, s, s});
  else inv.span("bwd.flash_delta", {b, a_tp, s}, dtype::fp32, tensor_category::activation_grads, event_kind::bwd_head,
                event_kind::bwd_embed);  // rowsum(dO * O), FlashAttention-2 backward

  if (run.framework == framework_kind::trainplan) add_harness_scratch(inv, m, run, stage);

  return finish_inventory(std::move(out), m);
}

}  // namespace trainplan
