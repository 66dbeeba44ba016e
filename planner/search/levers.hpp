#pragma once
// The levers a user has when a run does not fit, and what pulling each one costs. One list,
// used by the fit check's suggestions (planner/search/suggest.hpp), `plan search --levers` and `plan max --levers`:
// what a lever may change, how a changed run reads as command-line flags, and which costs it carries
// are all derived here, from the difference between two run_configs.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/system/gpu_spec.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/run/run_config.hpp"

namespace trainplan {

// The levers, as bits so that a set of them is one unsigned.
enum lever_bit : unsigned {
  lever_precision = 1,   // pure bf16, bf16-mixed instead of fp32/autocast, fp8-mixed, no fp32 gradient buffer
  lever_optimizer = 2,   // adamw-8bit, adafactor, lion
  lever_recompute = 4,   // selective, full
  lever_batch = 8,       // a smaller micro-batch with more accumulation: the same global batch
  lever_attention = 16,  // flash instead of eager
  lever_adapters = 32,   // LoRA, QLoRA
  lever_gpus = 64,       // more GPUs of the same kind, with a ZeRO stage; or a higher ZeRO stage on a
                         // data-parallel run's own GPUs
  lever_offload = 128,   // optimizer state in CPU memory
  lever_seq = 256,       // a shorter sequence: only when the user allows it (--allow-shorter-seq)
  lever_optimizer_impl = 512,  // where the stack offers PyTorch's AdamW flavours (offers_optimizer_impl): fused
                               // instead of foreach, the same update without the foreach temporary as large as
                               // adam.v (planner/memory/inventory.cpp)
  lever_ep = 1024,             // Mixture of Experts: shard the experts over the data-parallel GPUs
  lever_allocator = 2048,      // where the stack's allocator is PyTorch's (offers_expandable_segments):
                               // PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, the same tensors with less
                               // fragmentation (planner/allocator/expandable_allocator.hpp)
  lever_loss = 4096,           // where the stack takes --loss: torchtune's chunked cross-entropy or Liger's fused
                               // linear cross-entropy instead of the whole fp32 logits (planner/profiles/hf/
                               // hf_loss_chunks.hpp); the same loss, computed in pieces
};
constexpr unsigned lever_count = 13;
constexpr unsigned every_lever = (1u << lever_count) - 1;

// "precision,optimizer" -> bits; throws input_error naming `option` and the unknown lever.
unsigned parse_levers(std::string_view list, std::string_view option);
std::string_view lever_name(lever_bit lever);
std::string lever_names(unsigned levers);  // "precision, recompute"; "none" for 0

// What a change costs the user, as a user would weigh it.
enum suggestion_cost : unsigned {
  cost_none = 0,         // same numerics: recompute, batch split, flash attention, fused AdamW, ZeRO, --ep,
                         // expandable segments
  cost_numerics = 1,     // changes the numerics: precision, optimizer, adapters
  cost_hardware = 2,     // more GPUs
  cost_slower = 4,       // offload: the same numerics on the same GPU, at PCIe speed
  cost_shorter_seq = 8,  // trains on shorter sequences than asked for
  cost_library = 16,     // the same loss from another library's kernels (--loss: torchtune's chunked
                         // cross-entropy, Liger's fused linear one): a dependency and a change to the training code;
                         // none where the stack ships it (stack_profile::own_losses)
};
std::string suggestion_cost_text(unsigned costs);  // "same numerics", "changes the numerics, more hardware"...
// The order a user chooses in: what keeps the numerics and the hardware (at full speed, then slower or
// through another library), then what changes the numerics or the data, then what needs more GPUs.
int cost_rank(unsigned costs);

// Which levers differ between two runs, what that costs, and the flags that turn `from` into `to`
// (in a fixed order: recompute, attention, batch, precision, optimizer and its implementation, offload,
// adapters, GPUs, seq, allocator).
unsigned levers_changed(const run_config& from, const run_config& to);
unsigned change_costs(const run_config& from, const run_config& to);
std::vector<std::string> change_flags(const run_config& from, const run_config& to);

// One alternative a lever offers.
struct lever_change {
  lever_bit lever;
  std::function<void(run_config&)> apply;
};

// How far the GPU lever reaches: twice, four times... the run's GPUs up to max_gpus, each with ZeRO 1, 2 and 3
// (and, for a Mixture-of-Experts model, also with the largest expert parallelism those GPUs allow).
struct lever_reach {
  std::uint64_t max_gpus = 8;  // one node
};

// The alternatives `lever` offers to `base` for `model` on `gpu`: only those the run's stack can train (a stack may
// lack a precision regime or selective recomputation, or train with AdamW alone: its own checks, stack_profile::check,
// decide). Empty when it has none: recompute already full, a micro-batch of 1, a GPU without bf16... The seq lever has
// none here: the longest sequence that fits depends on the rest of the run and is found by a search (suggest.cpp, max).
std::vector<lever_change> lever_alternatives(lever_bit lever, const model_spec& model, const run_config& base,
                                             const gpu_spec& gpu, const lever_reach& reach = {});

// Every distinct run reachable from `base` by pulling any subset of `levers` (each at most once), `base`
// itself first: the cross product of each lever's alternatives plus "unchanged", without duplicates.
std::vector<run_config> lever_space(unsigned levers, const model_spec& model, const run_config& base,
                                    const gpu_spec& gpu, const lever_reach& reach = {});

// False when the run's framework refuses the run outright (its own checks, without building anything).
bool framework_can_train(const model_spec& model, const run_config& run);

}  // namespace trainplan
