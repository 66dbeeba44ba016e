// The model state one GPU holds (model_state.hpp): weights or a frozen base and adapters, master copy,
// gradients (PyTorch's .grad per parameter where the stack's rules say so), optimizer state and communication
// buffers, sharded by the ZeRO stage and offloaded where asked.
#include "planner/memory/model_state.hpp"

#include <algorithm>

#include "planner/memory/inventory_builder.hpp"
#include "planner/model/param_count.hpp"
#include "planner/run/lora.hpp"
#include "planner/run/optimizer.hpp"
#include "planner/util/checked_math.hpp"

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

// `f` with the vocabulary tables it holds (the token embedding, an untied head or a pipeline stage's copy of a
// tied one) padded from m.vocab to `rows` rows (vocab_rows): what a stack that pads stores and trains.
// The counts the report shows come from describe_model, unpadded; these feed the inventory alone.
model_facts with_padded_vocab_tables(model_facts f, const model_spec& m, std::uint64_t rows) {
  const char* what = "padded vocabulary";
  const std::uint64_t extra = checked_mul(rows - m.vocab, m.hidden, what);
  for (param_tensor& t : f.tensors) {
    if (!t.vocabulary_table()) continue;
    const bool embed = t.role == param_role::token_embedding;
    t.shape[0] = rows;
    t.count = checked_add(t.count, extra, what);
    t.active = checked_add(t.active, extra, what);
    (embed ? f.counts.embedding : f.counts.lm_head) += extra;
    f.counts.total = checked_add(f.counts.total, extra, what);
    f.counts.active = checked_add(f.counts.active, extra, what);
  }
  return f;
}

// AccumulateGrad (torch/csrc/autograd/functions/accumulate_grad.h, accumulateGrad): while .grad is undefined
// (a step's first micro-batch, after zero_grad(set_to_none=True)) it steals the incoming gradient, which is
// then the .grad the per-parameter gradients stand for; once .grad exists (later micro-batches) it adds the
// incoming one in place and drops it. The incoming gradients of a layer's weights come and go one at a
// time; the token table's is as large as the vocabulary: embedding_dense_backward's new [V, h] gradient,
// added to .grad in later micro-batches, and with tied embeddings added in every micro-batch to the head's
// contribution, which the engine holds in the node's input buffer from the head's backward until then
// (torch/csrc/autograd/input_buffer.cpp, accumulate: old_var.add_(var)). In the first micro-batch that
// held contribution becomes .grad (grads.head); in later ones it is one more table beside it.
void add_incoming_table_grads(inventory_builder& inv, const model_spec& m, dtype grads) {
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

void add_incoming_table_gradients(inventory_builder& inv, const model_spec& m, dtype grads) {
  add_incoming_table_grads(inv, m, grads);
}

void add_model_state(inventory& out, const model_spec& m, const run_config& run, const precision_layout& layout,
                     const model_facts& given_facts, const stack_traits& traits, const model_state_rules& rules) {
  // A stack that pads its vocabulary tables (stack_traits::vocab_pad_multiple) stores and trains their padded
  // rows; V stays the number of classes.
  const model_facts* facts = &given_facts;
  model_facts padded_facts;
  if (const std::uint64_t rows = vocab_rows(m, traits.vocab_pad_multiple); rows != m.vocab) {
    padded_facts = with_padded_vocab_tables(given_facts, m, rows);
    facts = &padded_facts;
  }
  inventory_builder inv(static_cast<std::int64_t>(m.layers), out.tensors);
  const param_counts& pc = facts->counts;
  // Sharding (ZeRO, Rajbhandari et al. 2020, Fig. 1): stage 1 partitions the optimizer states (with the
  // fp32 master copy, part of "K" in the paper), stage 2 also the gradients, stage 3 also the weights,
  // each over the data-parallel degree. Tensor parallelism first splits every parameter by tp (norm
  // weights are split too here; they are under 0.1% of a model).
  const std::uint64_t tp = run.tp, dp = run.data_context_parallel();  // context-parallel ranks hold the same weights
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
  // The dtypes of what trains. peft keeps LoRA adapters in fp32 whatever the base's dtype
  // (get_peft_model's autocast_adapter_dtype=True upcasts a 16-bit base's adapters: peft's
  // cast_adapter_dtype), so their gradients and AdamW state are fp32 too, with no master copy; unless the
  // model is cast after get_peft_model (run.lora_fp32 false: the model's dtype).
  precision_layout trained_layout = layout;
  if (rules.peft_adapters && adapters) {
    trained_layout.weights = trained_layout.grads = trained_layout.optimizer_state =
        run.lora_fp32 ? dtype::fp32 : layout.weights;
    trained_layout.master.reset();
    trained_layout.grad_accum.reset();
  }
  // The frozen base: the model's own dtype under peft (an fp32 model under autocast, bf16 under --precision
  // bf16); other stacks load it in bf16.
  const dtype base_type = adapters && !rules.peft_adapters ? dtype::bf16 : layout.weights;
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
  const std::uint64_t trainable = adapters ? share(lora_params(m, run.lora_rank, run.lora_targets, traits), tp) : P;
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
    out.adapter_layer_tensors = lora_layer_tensors(m, run.lora_rank, run.lora_targets, traits);
    out.adapter_qkv_modules = lora_qkv_modules(m, run.lora_targets, traits);
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
  // PyTorch creates each parameter's .grad when its backward runs (model_state_rules::grads_per_parameter): a
  // layer's gradients appear at its backward, the head's right after the loss, the embedding's last; so do
  // peft's adapters' (a recorded allocator history of GPT-2 with LoRA, data/measurements/allocator-history-*:
  // each layer's lora_A and lora_B gradients made as its backward runs). Sharded gradients keep one buffer.
  const std::int64_t bwd0 = event_index(event_kind::bwd_layer, 0, static_cast<std::int64_t>(m.layers));
  if (rules.grads_per_parameter && adapters && run.zero < 2 && !out.adapter_layer_tensors.empty()) {
    std::uint64_t layer_adapters = 0;
    for (std::uint64_t e : out.adapter_layer_tensors) layer_adapters = checked_add(layer_adapters, e, "LoRA gradients");
    tensor_spec& t = inv.model_state("layer{}.lora.grads", layer_adapters, trained_layout.grads, tensor_category::gradients,
                                     state_lifetime::gradient_from_backward, tensor_role::gradients, param_scope::layer_adapters);
    inv.per_layer(t);
    t.intervals[0] = {bwd0, -1, 0, 0};
  } else if (rules.grads_per_parameter && !adapters && run.zero < 2) {
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
    add_incoming_table_grads(inv, m, layout.grads);
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
    if (rules.foreach_adamw && st.name == "adam.v" && run.optimizer_impl == optimizer_impl_kind::foreach_impl) {
      // This add may move the vector's storage: `t` must not be used after it.
      tensor_spec& tmp = b.add("adam.foreach_sqrt_v", {bytes / dtype_bytes(st.type)}, st.type, tensor_category::optimizer);
      tmp.bytes = bytes;
      tmp.lifetime = state_lifetime::optimizer_only;
      tmp.role = tensor_role::optimizer_temporary;
      tmp.scope = scope;
    }
  }
  // Communication buffers, where the stack's rules ask for the paper's (model_state_rules).
  const std::uint64_t layer_params =
      std::max(local_weights(share(pc.per_layer, tp), layer_experts), share(pc.per_dense_layer, tp));  // the largest layer
  if (rules.ddp_bucket && dp > 1 && run.zero < 3)
    inv.model_state("ddp.grad_bucket", (25ull << 20) / dtype_bytes(layout.grads), layout.grads, tensor_category::gradients,
                    state_lifetime::backward_to_optimizer, tensor_role::communication);
  if (rules.zero3_gather_buffers && dp > 1 && run.zero >= 3) {
    inv.model_state("zero3.gathered_weights", checked_mul(2, layer_params, "gather buffer"), base_type,
                    tensor_category::weights, state_lifetime::whole_run, tensor_role::communication);
    inv.model_state("zero3.reduce_bucket", adapters ? share(trainable, m.layers) : layer_params, layout.grads,
                    tensor_category::gradients, state_lifetime::backward_to_optimizer, tensor_role::communication);
  }

  if (rules.grad_scaler && layout.loss_scaling) add_grad_scaler_state(inv);
}

}  // namespace trainplan
