#pragma once
// The named tensor inventory (DESIGN.md): every byte the planner predicts belongs to a buffer with a
// name, a shape, a dtype and a lifetime. The harness allocates under the same names, so predicted and
// measured bytes line up name by name.
#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "planner/util/dtype.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/model/param_count.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"

namespace trainplan {

// Which line of the report a buffer belongs to (the `memory.*_bytes` fields of --json).
enum class tensor_category { weights, master_weights, gradients, optimizer, activations, logits, activation_grads };
constexpr int tensor_category_count = 7;
std::string_view category_name(tensor_category c);  // "weights", "master_weights"...

// Events of one micro-batch, in order. With L layers their indices are:
//   fwd_embed 0 | fwd_layer i: 1+i | fwd_head L+1 | loss L+2 | bwd_head L+3 |
//   bwd_layer i: L+4+(L-1-i) | bwd_embed 2L+4          (2L+5 events)
// "head" is the final norm and the output projection. Within an event, the planner counts every
// buffer whose lifetime covers the event as live at once (the harness allocates at the start of the
// event and frees at its end, so the two agree).
enum class event_kind { fwd_embed, fwd_layer, fwd_head, loss, bwd_head, bwd_layer, bwd_embed, optimizer };
// Inline: the inventory builders and the timeline call it for every buffer of every configuration.
constexpr std::int64_t event_index(event_kind kind, std::int64_t layer, std::int64_t layers) {
  switch (kind) {
    case event_kind::fwd_embed: return 0;
    case event_kind::fwd_layer: return 1 + layer;
    case event_kind::fwd_head: return layers + 1;
    case event_kind::loss: return layers + 2;
    case event_kind::bwd_head: return layers + 3;
    case event_kind::bwd_layer: return layers + 4 + (layers - 1 - layer);
    case event_kind::bwd_embed: return 2 * layers + 4;
    case event_kind::optimizer: return 2 * layers + 5;
  }
  return -1;
}

// Lifetime in micro-batch event indices: instance i (a layer index for per-layer buffers, 0 otherwise)
// lives over [first_base + first_step*i, last_base + last_step*i]. Steps are -1, 0 or 1: a layer's forward
// events rise with its index, its backward events fall (the timeline relies on it).
struct event_interval {
  std::int64_t first_base = 0, first_step = 0;
  std::int64_t last_base = 0, last_step = 0;
};

// How a buffer lives across micro-batches and steps.
//   whole_run: allocated before the first step, never freed (weights, master copy).
//   backward_to_optimizer: from the first backward event of a step's first micro-batch until the
//     optimizer step ends (gradients; freed by zero_grad(set_to_none=True), PyTorch's default).
//   from_first_optimizer: created by the first optimizer step, kept after (lazy Adam state, as PyTorch).
//   micro_batch: lives within each micro-batch over its intervals (activations and their gradients).
//   gradient_from_backward: a gradient autograd creates when its own backward runs (PyTorch's .grad):
//     in a step's first micro-batch instance i appears at event intervals[0].first_base + first_step*i;
//     it is live throughout later micro-batches and until the optimizer step ends.
//   optimizer_only: a temporary of the optimizer step (foreach AdamW's square root of the second moment).
//   later_micro_batches: as micro_batch, but only in a step's micro-batches after the first (a gradient
//     that AccumulateGrad adds to the .grad the first micro-batch created, before it is freed).
enum class state_lifetime { whole_run, backward_to_optimizer, from_first_optimizer, micro_batch, gradient_from_backward,
                            optimizer_only, later_micro_batches };

// What a buffer is, beyond its report category: code asks this rather than parsing names.
enum class tensor_role {
  data,                 // activations, their gradients, logits and the loss's buffers
  trained_weights,      // the weights the optimizer updates: the model's, or the LoRA adapters
  frozen_weights,       // weights no optimizer writes: a frozen or quantized base, fp8 and autocast copies
  master_weights,
  gradients,            // what the optimizer reads (and, with --grad-dtype fp32, its accumulation buffer)
  optimizer_state,
  optimizer_temporary,  // exists only during the optimizer step (foreach AdamW's sqrt(v))
  communication,        // DDP buckets, ZeRO-3's gathered weights and reduce bucket
};

// Which parameters a model-state buffer holds, one tensor per parameter in PyTorch (the allocator replay
// allocates them one by one): all of them, one layer's (or its GEMM weights'), the head's, the embedding's.
// adapters: the LoRA adapters' tensors (inventory::adapter_layer_tensors, every layer); layer_adapters_qkv_a:
// layer_adapters: one layer's adapter tensors (per-layer gradients, as PyTorch's per-parameter .grad makes them); layer_adapters_qkv_a: that layer's
// lora_A of its q, k and v modules; layer_adapters_rest: its other adapter tensors;
// layer_matmul_qkv and layer_matmul_after_qkv: one layer's q, k, v weights, and its other GEMM weights.
enum class param_scope {
  none, all, layer, layer_matmul, head, embedding, adapters, layer_adapters, layer_adapters_qkv_a, layer_adapters_rest,
  layer_matmul_qkv, layer_matmul_after_qkv
};

// Up to four dimensions, stored inline: an inventory is built per configuration, millions of times in
// a sweep, so it allocates nothing per buffer.
struct tensor_shape {
  std::array<std::uint64_t, 4> dims{};
  std::size_t rank = 0;

  tensor_shape() = default;
  tensor_shape(std::initializer_list<std::uint64_t> d) {
    for (std::uint64_t x : d) dims[rank++] = x;
  }
  const std::uint64_t* begin() const { return dims.data(); }
  const std::uint64_t* end() const { return dims.data() + rank; }
  std::size_t size() const { return rank; }
  std::uint64_t operator[](std::size_t i) const { return dims[i]; }
  std::vector<std::uint64_t> to_vector() const { return {begin(), end()}; }
  friend bool operator==(const tensor_shape& a, const std::vector<std::uint64_t>& b) {
    return a.rank == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }
};

struct tensor_spec {
  std::string_view name;              // "layer{}.attn.softmax": {} stands for the layer index (static storage)
  tensor_shape shape;                 // (b, a, s, s)
  dtype type = dtype::bf16;
  std::uint64_t bytes = 0;            // one instance: product(shape) * dtype_bytes(type)
  tensor_category category = tensor_category::activations;
  state_lifetime lifetime = state_lifetime::micro_batch;
  tensor_role role = tensor_role::data;
  param_scope scope = param_scope::none;
  bool per_layer = false;             // one instance per layer in [layer_begin, layer_end)
  std::uint32_t layer_begin = 0, layer_end = 0;  // every layer, or (DeepSeek-V3) the dense or the MoE ones
  bool kept_to_backward = false;      // per-layer buffer kept from its forward to its backward
  // Exists for a moment inside its event, when fewer buffers are live than the event's total (PyTorch's SDPA math
  // path: a third s x s buffer inside the softmax's backward, after the layer's MLP buffers are freed). The
  // allocator replay makes and frees it (it is what reserves a segment); the peak timeline, which counts an
  // event's buffers as live all at once, leaves it out rather than overstate the peak with it.
  bool momentary = false;
  // Counted by the peak timeline but not made by the allocator replay: a layer's forward working set where
  // momentary buffers spell out, op by op, what it stands for (a forward written op by op).
  bool replayed = true;
  // The buffer is this many equal allocations in PyTorch (dimension 0: peft's per-module copies of a
  // layer's input and its per-module lora_A outputs); the allocator replay makes them one by one.
  std::uint16_t allocations = 1;
  // A buffer of one forward event (a temporary): when the allocator replay frees it. By default once the
  // event's next buffer that outlives the event exists; or right after the allocation of inv.tensors[i] (the
  // op whose output ends the Python variable holding it); or once the layer's output (the next layer's
  // input) exists, for what the decoder layer's forward holds until it returns.
  static constexpr std::uint16_t free_at_next_kept = 0xFFFF, free_at_layer_output = 0xFFFE;
  std::uint16_t freed_after = free_at_next_kept;
  int interval_count = 0;             // micro_batch lifetime: 1 or 2 intervals (recomputed: fwd and bwd)
  std::array<event_interval, 2> intervals{};

  tensor_spec() = default;
  // What inventory_builder::add knows; the rest keeps its defaults. Member by member: a sweep builds
  // millions of specs, and zeroing the whole struct first and then writing it costs more than the fields.
  tensor_spec(std::string_view name_, const tensor_shape& shape_, dtype type_, std::uint64_t bytes_,
              tensor_category category_)
      : name(name_), shape(shape_), type(type_), bytes(bytes_), category(category_) {}  // fixed size: no memcpy call

  std::string instance_name(std::uint64_t layer) const;  // "layer7.attn.softmax"
  // Copies in one micro-batch's inventory: one per layer that holds it, or one.
  std::uint64_t instances() const { return per_layer ? layer_end - layer_begin : 1; }
};

// One step of a backward event written op by op (e.g. planner/profiles/hf/activations_hf_backward.hpp): allocate or free
// the buffers named `tensor` (every one the inventory holds by that name whose lifetime starts or ends in the
// event), or, with `part`, only the allocation of a gradient buffer that stands for that parameter tensor
// ("layer{}.mlp.proj.weight"); `recompute` marks where a checkpointed layer's recomputation runs (the first
// op that needs a saved tensor). The allocator replay follows these steps in order in the event, instead of
// its reverse walk; the peak timeline does not read them. A step applies where the run holds every bit of
// `when_all` and none of `when_none` (the profile's own condition bits, backward_program::holds); one that
// applies must name a buffer the inventory holds (and a parameter it stands for): the replay refuses a program
// that does not (std::logic_error naming the step), never skipping it.
struct backward_step {
  enum kind_t : std::uint8_t { alloc, free, recompute };
  kind_t kind;
  std::string_view tensor = {};
  std::string_view part = {};
  std::uint64_t when_all = 0, when_none = 0;
  constexpr bool applies(std::uint64_t holds) const { return (when_all & holds) == when_all && (when_none & holds) == 0; }
};
struct backward_program {
  event_kind event = event_kind::bwd_layer;  // bwd_head, bwd_layer (each layer's backward), bwd_embed
  const backward_step* steps = nullptr;      // static storage
  std::size_t count = 0;                     // 0: none, the replay's reverse walk
  std::uint64_t holds = 0;                   // the run's condition bits, which the steps' conditions test
};

struct inventory {
  std::uint64_t layers = 0;
  std::uint64_t dense_layers = 0;  // DeepSeek's dense first layers, whose buffers differ from the MoE layers'
  std::int64_t events_per_micro_batch = 0;
  std::vector<tensor_spec> tensors;       // on the GPU
  std::vector<tensor_spec> host_tensors;  // offloaded to CPU memory (ZeRO-Offload / ZeRO-Infinity)
  // LoRA: the element counts of one layer's adapter tensors (planner/run/lora.hpp lora_layer_tensors), which every
  // layer holds; what a buffer of param_scope::adapters stands for. Empty without adapters.
  std::vector<std::uint64_t> adapter_layer_tensors;
  std::uint32_t adapter_qkv_modules = 0;  // how many of those modules (lora_A, lora_B each) are q, k and v's
  // The layers' forward is listed op by op in program order (a stack whose allocator is replayed); where it is
  // not, what in the run has no op order written (the report names it: "peft's lora_dropout", ...).
  bool forward_in_program_order = false;
  std::string_view coarse_forward_reason;
  // Backward events written op by op (the head's, each layer's, the embedding's); where they are not and the
  // forward is, what has no backward order written.
  std::array<backward_program, 3> backward_programs{};
  std::string_view coarse_backward_reason;
  // What one layer keeps from its forward to its backward (Korthikanti et al. 2022 count this).
  std::uint64_t activations_per_layer_bytes = 0;   // the last layer's (an MoE layer with dense first layers)
  std::uint64_t activations_all_layers_bytes = 0;  // every layer's
};

// Sets the inventory's layer counts and its per-layer activation totals once its buffers are added.
inventory finish_inventory(inventory out, const model_spec& m);

}  // namespace trainplan
