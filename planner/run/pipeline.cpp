// Pipeline parallelism (pipeline.hpp, whose formulas cite Megatron-Core's schedules.py and Narayanan et al.
// 2021): the chunk forwards in flight, the bubble, and the layers and parameters one pipeline GPU holds.
#include "planner/run/pipeline.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "planner/model/model_facts.hpp"
#include "planner/util/checked_math.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {

std::uint64_t pipeline_chunks_in_flight(std::uint64_t rank, std::uint64_t pp, std::uint64_t vpp,
                                        std::uint64_t micro_batches) {
  // schedules.py, get_pp_rank_microbatches: the warm-up forwards, then the one forward each backward follows.
  const std::uint64_t later_ranks = pp - rank - 1;
  const std::uint64_t warmup =
      vpp == 1 ? later_ranks : checked_add(checked_mul(2, later_ranks, "pipeline warm-up"),
                                           checked_mul(vpp - 1, pp, "pipeline warm-up"), "pipeline warm-up");
  const std::uint64_t total = checked_mul(micro_batches, vpp, "pipeline chunk forwards");
  return std::min(warmup + 1, total);
}

std::uint64_t pipeline_first_chunk_in_flight(std::uint64_t chunks, std::uint64_t pp, std::uint64_t vpp) {
  const std::uint64_t round = checked_mul(pp, vpp, "pipeline round");
  return (chunks / round) * pp + std::min(chunks % round, pp);
}

double pipeline_bubble_fraction(std::uint64_t pp, std::uint64_t vpp, std::uint64_t micro_batches) {
  if (pp <= 1) return 0.0;
  return static_cast<double>(pp - 1) / (static_cast<double>(vpp) * static_cast<double>(micro_batches));
}

model_spec pipeline_stage_model(const model_spec& model, std::uint64_t rank, std::uint64_t pp, std::uint64_t vpp) {
  model_spec stage = model;
  stage.layers = model.layers / pp;
  // Chunk k of this GPU holds the layers [(rank + k p) c, (rank + k p + 1) c) with c = L / (p v)
  // (Megatron-Core's virtual pipeline ranks: chunk k of rank r is model chunk r + k p).
  const std::uint64_t chunk_layers = model.layers / (pp * vpp);
  stage.dense_layers = 0;
  for (std::uint64_t k = 0; k < vpp && model.dense_layers > 0; ++k) {
    const std::uint64_t begin = (rank + k * pp) * chunk_layers;
    if (model.dense_layers > begin) stage.dense_layers += std::min(model.dense_layers - begin, chunk_layers);
  }
  return stage;
}

model_facts pipeline_stage_facts(const model_spec& stage_model, bool first, bool last) {
  model_facts f;
  const model_facts whole = describe_model(stage_model);
  const param_counts& c = whole.counts;
  for (const param_tensor& t : whole.tensors) {
    const bool embed = t.embedding(), head = t.role == param_role::final_norm || t.role == param_role::head;
    if (t.per_layer || (embed && first) || (head && last)) f.tensors.push_back(t);
  }
  f.layers = whole.layers;  // the stage's layers: every per-layer tensor above is held once per stage layer
  f.counts = c;             // the layers' counts are the stage's; the embedding and the head follow
  const model_spec& m = stage_model;
  const std::uint64_t table = checked_mul(m.vocab, m.hidden, "head copy");
  f.counts.embedding = first ? c.embedding : 0;
  f.counts.final_norm = last ? c.final_norm : 0;
  f.counts.lm_head = last ? (m.tied_embeddings && !first ? table : c.lm_head) : 0;
  if (last && m.tied_embeddings && !first)
    f.tensors.push_back({"lm_head.weight", {m.vocab, m.hidden}, table, false, true, table, false, layer_set::all,
                         param_role::head});
  const char* what = "parameter count";
  f.counts.total = checked_add(checked_add(f.counts.layers_total, f.counts.embedding, what),
                               checked_add(f.counts.final_norm, f.counts.lm_head, what), what);
  f.counts.matmul = checked_add(c.matmul_layers_total, last ? table : 0, what);
  f.tensor_instances = count_tensor_instances(f.tensors, f.layers);
  return f;
}

void check_pipeline_layout(const model_spec& m, const run_config& run) {
  if (run.vpp == 0) throw input_error("--vpp must be at least 1");
  if (run.vpp > 1 && run.pp == 1)
    throw input_error(fmt::format("--vpp {} interleaves pipeline stages: it needs --pp of at least 2", run.vpp));
  if (m.layers % run.pp != 0)
    throw input_error(fmt::format("--pp {} must divide the {} layers of {}", run.pp, m.layers, m.name));
  if (run.vpp == 1) return;
  if (run.vpp > m.layers || m.layers % (run.pp * run.vpp) != 0)
    throw input_error(fmt::format("--pp {} x --vpp {} must divide the {} layers of {} (each model chunk holds the same "
                                  "number of layers)", run.pp, run.vpp, m.layers, m.name));
  // schedules.py, forward_backward_pipelining_with_interleaving: micro-batches run in groups of p per chunk.
  if (run.grad_accum % run.pp != 0)
    throw input_error(fmt::format("--vpp {}: the interleaved schedule runs micro-batches in groups of --pp {}, so "
                                  "--grad-accum {} must be a multiple of {}", run.vpp, run.pp, run.grad_accum, run.pp));
  if (m.dense_layers > 0)
    throw input_error(fmt::format("--vpp with {}'s {} dense first layers is not modelled (use --vpp 1)", m.name,
                                  m.dense_layers));
}

}  // namespace trainplan
