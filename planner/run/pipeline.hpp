#pragma once
// Pipeline parallelism: which layers a pipeline GPU holds, how many micro-batches' activations it keeps in
// flight under Megatron's 1F1B schedule (plain or interleaved), and the bubble it idles for.
#include <cstdint>

#include "planner/model/model_facts.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/run/run_config.hpp"

namespace trainplan {

// One pipeline GPU (planner/run/pipeline.hpp): `m` then holds one model chunk's layers (the GPU's layers, or a
// 1/vpp share of them when interleaved). The first GPU owns the embedding, the last the head and the loss;
// `inflight` chunk forwards keep their layers' activations until their backward (Korthikanti et al. 2022,
// Sec. 4.2.3), `embedding_inflight` of them the embedding's.
struct pipeline_stage {
  bool first = true, last = true;
  std::uint64_t inflight = 1;
  std::uint64_t embedding_inflight = 1;
};

// Forward passes of model chunks a pipeline GPU has run whose backward has not run yet, at most, over a
// step of `micro_batches` micro-batches: what its activation memory peaks at. Megatron-Core
// (megatron/core/pipeline_parallel/schedules.py, get_pp_rank_microbatches): rank r of p runs
// p - r - 1 warm-up forwards without interleaving, 2(p - r - 1) + (v - 1)p with v model chunks per GPU
// (microbatch_group_size_per_vp_stage = p, its default), capped at the step's v * micro_batches chunk
// forwards; then one more forward before each backward (max_outstanding_backprops = warm-up + 1).
// Each chunk forward holds the activations of L / (p v) layers. Rank 0 keeps p micro-batches of its
// L/p layers without interleaving (Korthikanti et al. 2022, Sec. 4.2.3: L layers' worth), and
// (vp + p - 1) chunks of L/(pv) layers with it: L (1 + (p - 1)/(pv)) layers' worth, the paper's factor.
std::uint64_t pipeline_chunks_in_flight(std::uint64_t rank, std::uint64_t pp, std::uint64_t vpp,
                                        std::uint64_t micro_batches);

// Of `chunks` chunk forwards in flight on the first pipeline GPU, those of its first chunk, which holds the
// embedding: the schedule runs p micro-batches of chunk 0, then of chunk 1, ... (schedules.py,
// get_schedule_table with microbatch_group_size_per_vp_stage = p), so chunk 0 has min(k mod pv, p) plus p
// for each whole round of pv before it. Without interleaving, every chunk forward is chunk 0's.
std::uint64_t pipeline_first_chunk_in_flight(std::uint64_t chunks, std::uint64_t pp, std::uint64_t vpp);

// The share of a step a pipeline idles in its fill and drain: (p - 1) / (v m) for p stages, v chunks
// per GPU and m micro-batches (Narayanan et al. 2021, Sec. 2.2: (p-1)/m, divided by v when interleaved).
double pipeline_bubble_fraction(std::uint64_t pp, std::uint64_t vpp, std::uint64_t micro_batches);

// What pipeline GPU `rank` of run.pp holds of `model`: its L/p layers (the chunks rank, rank + p, ...
// of L/(pv) layers each when interleaved), counting which of them are DeepSeek's dense first layers.
model_spec pipeline_stage_model(const model_spec& model, std::uint64_t rank, std::uint64_t pp, std::uint64_t vpp);

// The parameters pipeline GPU `stage_model` holds: its layers, plus the embedding on the first GPU and the
// final norm and head on the last (with tied embeddings, the last keeps its own copy of the table, as
// Megatron-LM does: it sums the two tables' gradients across the embedding group).
model_facts pipeline_stage_facts(const model_spec& stage_model, bool first, bool last);

// Refuses a pipeline layout Megatron would refuse or this model cannot split: --pp must divide the layers
// (into p v chunks when interleaved); interleaving needs a whole number of groups of p micro-batches
// (schedules.py refuses other counts) and no dense first layers (their chunks are not modelled).
void check_pipeline_layout(const model_spec& model, const run_config& run);

}  // namespace trainplan
