#pragma once
// The per-rank memory of PyTorch's FSDP2 (torch.distributed.fsdp.fully_shard) as torchtitan and Accelerate wrap a
// decoder model: a unit per decoder layer, one for the token embedding, and one for the final norm and the head
// that stays unsharded from forward to backward; every parameter sharded along its first dimension over the
// data-parallel ranks, in its original dtype (fp32), gathered in MixedPrecisionPolicy's param_dtype (bf16) one
// unit at a time. Sources: torch/distributed/fsdp/_fully_shard/ (_fsdp_param.py, _fsdp_param_group.py,
// _fsdp_collectives.py) and torchtitan/distributed/fsdp.py (apply_fsdp_to_decoder).
#include <cstdint>

#include "planner/memory/inventory.hpp"
#include "planner/model/model_facts.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"

namespace trainplan {

// The elements of one FSDP unit, whole and as one rank's padded shard: fully_shard splits each parameter
// along dim 0 with torch.chunk into N pieces of ceil(d0 / N) rows, and every rank allocates that many rows
// (FSDPParam._init_sharded_param; the last ranks' rows past d0 are padding), so a unit's shard is the sum
// over its tensors of ceil(d0 / N) x (numel / d0).
struct fsdp2_unit {
  std::uint64_t elements = 0;        // the unit's parameters (what the all-gather rebuilds, unpadded)
  std::uint64_t shard_elements = 0;  // one rank's padded shard
  std::uint64_t padded_elements() const;  // shard_elements x ranks: the all-gather's output, padding included
  std::uint64_t ranks = 1;
};

struct fsdp2_units {
  fsdp2_unit layer;      // one decoder layer (the largest, where DeepSeek's dense first layers differ)
  fsdp2_unit embedding;  // the token (and position) embedding; with tied embeddings it joins the head's unit
  fsdp2_unit head;       // the final norm and the head (torchtitan: [norm, output], reshard_after_forward=False)
  std::uint64_t shard_elements_total = 0;  // every unit's shard: the rank's sharded parameters
};
fsdp2_units fsdp2_unit_sizes(const model_facts& facts, std::uint64_t ranks);

// Adds FSDP2's per-rank model state and its per-unit communication buffers to `out`: the sharded parameters
// (original dtype, fp32), the sharded gradients each unit's reduce-scatter writes, the optimizer's state over
// the shard; and, per unit, the all-gather's flat output, the unsharded parameters (param_dtype), the unsharded
// gradients autograd writes, and the reduce-scatter's input (reduce dtype), each live where FSDP2's hooks hold
// it (fsdp2_state.cpp says when).
void add_fsdp2_state(inventory& out, const model_spec& m, const run_config& run, const precision_layout& layout,
                     const model_facts& facts);

}  // namespace trainplan
