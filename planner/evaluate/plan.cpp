// One configuration planned (plan.hpp): the run checked, its inventory and timeline, the overhead lines, FLOPs,
// communication and step time, and the verdict; the allocator replay is allocator_replay.cpp.
#include "planner/evaluate/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "planner/model/model_facts.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/allocator/allocator_trace.hpp"
#include "planner/util/checked_math.hpp"
#include "planner/util/input_error.hpp"
#include "planner/run/lora.hpp"
#include "planner/run/pipeline.hpp"
#include "planner/time/communication.hpp"
#include "planner/time/roofline.hpp"

namespace trainplan {
namespace {

void validate_run(const model_spec& m, const run_config& run) {
  if (run.seq == 0 || run.micro_batch == 0 || run.grad_accum == 0)
    throw input_error("sequence length, micro-batch and accumulation must each be at least 1");
  if (m.max_positions > 0 && run.seq > m.max_positions)
    throw input_error(fmt::format("--seq {} is longer than model {}'s {} learned positions", run.seq, m.name,
                                  m.max_positions));
  if (run.dropout < 0.0 || run.dropout >= 1.0) throw input_error("--dropout must be at least 0 and below 1");
  // Tokens per step must be countable exactly.
  if (!product_fits_64_bits({run.seq, run.micro_batch, run.grad_accum, run.gpus}))
    throw input_error(fmt::format("tokens per step, --seq {} x --micro-batch {} x --grad-accum {} x --gpus {}, is larger "
                                  "than 64 bits can hold", run.seq, run.micro_batch, run.grad_accum, run.gpus));
  // The inventory multiplies a micro-batch's tokens by a row width and up to 8 bytes an element, and eager
  // attention's scores by heads x seq again. Checked here, the error names the options that are too large,
  // not the first tensor whose size would wrap (checked_math.hpp stays the backstop for the rest).
  const std::uint64_t widest_row = std::max({m.hidden, m.ffn, m.dense_mlp_width(), m.vocab});
  if (!product_fits_64_bits({run.seq, run.micro_batch, widest_row, 8}))
    throw input_error(fmt::format("--seq {} x --micro-batch {} tokens of the model's widest row ({} elements) are larger "
                                  "than 64 bits of bytes can hold", run.seq, run.micro_batch, widest_row));
  if (run.attention == attention_kind::eager && !product_fits_64_bits({run.micro_batch, m.heads, run.seq, run.seq, 8}))
    throw input_error(fmt::format("--seq {} squared x --micro-batch {} x {} heads (eager attention's scores) is larger "
                                  "than 64 bits of bytes can hold", run.seq, run.micro_batch, m.heads));
  check_parallel_layout(run);
  check_pipeline_layout(m, run);
  if (m.heads % run.tp != 0 || m.kv_heads % run.tp != 0 || m.ffn % run.tp != 0 || m.dense_mlp_width() % run.tp != 0)
    throw input_error(fmt::format("--tp {} must divide the heads ({}), kv heads ({}) and ffn ({}{}) of {}", run.tp, m.heads,
                                  m.kv_heads, m.ffn, m.dense_ffn > 0 ? fmt::format(", dense {}", m.dense_ffn) : "", m.name));
  // Context parallelism: Megatron-Core cuts each sequence into 2 cp chunks and gives rank r chunks r and 2cp-1-r, so
  // that causal attention's work is the same on every rank (megatron/core/utils.py, get_batch_on_this_cp_rank).
  if (run.cp > 1 && run.seq % (2 * run.cp) != 0)
    throw input_error(fmt::format("--cp {} needs --seq {} to split into 2 x {} equal chunks (a multiple of {})", run.cp, run.seq,
                                  run.cp, 2 * run.cp));
  if (run.cp > 1 && run.ep > 1) throw input_error("--cp with --ep: context and expert parallelism together are not modelled");
  if (run.zero < 0 || run.zero > 3) throw input_error("--zero must be 0, 1, 2 or 3");
  if ((run.offload == offload_mode::params || run.offload == offload_mode::both) && run.zero != 3)
    throw input_error("--offload params needs --zero 3 (ZeRO-Infinity offloads partitioned parameters)");
  if (run.finetune != finetune_kind::full && (run.lora_rank == 0 || run.lora_targets == 0))
    throw input_error("--finetune lora/qlora needs --lora-rank of at least 1 and some --lora-targets");
  // An update B·A of rank r adds nothing past the smaller side of the matrix it adapts (Hu et al. 2021).
  if (run.finetune != finetune_kind::full && run.lora_rank > m.hidden)
    throw input_error(fmt::format("--lora-rank {} is larger than the hidden size ({}) of {}: a low-rank update has a rank "
                                  "below the matrix's sides", run.lora_rank, m.hidden, m.name));
  if (!(run.capacity_factor == 0.0 || (run.capacity_factor >= 1.0 && run.capacity_factor <= 1024.0)))
    throw input_error("--capacity-factor must be from 1 to 1024, or dropless");
  if (run.ep == 0) throw input_error("--ep must be at least 1");
  if (run.ep > 1 || run.capacity_factor > 0.0) {
    if (!m.is_moe()) throw input_error(fmt::format("--ep and --capacity-factor need a Mixture-of-Experts model; {} is dense", m.name));
    if (m.experts % run.ep != 0)
      throw input_error(fmt::format("--ep {} must divide the {} experts of {}", run.ep, m.experts, m.name));
    if (run.ep > 1 && run.finetune != finetune_kind::full)
      throw input_error("--ep with LoRA/QLoRA adapters is not modelled");
    if (run.data_parallel() % run.ep != 0)
      throw input_error(fmt::format("--ep {} must divide the data-parallel GPUs ({} = --gpus / (--tp x --pp))", run.ep,
                                    run.data_parallel()));
  }
  if (run.finetune == finetune_kind::qlora && run.precision == precision_regime::fp32)
    throw input_error("--finetune qlora computes in bf16 over an NF4 base; it cannot be combined with --precision fp32");
}

// The buffer the optimizer writes updated weights into: the LoRA adapters when training them, otherwise
// the model's weights (not the fp8 copies or the frozen NF4 base).
std::uint64_t trained_weight_bytes(const inventory& inv) {
  for (const std::vector<tensor_spec>* list : {&inv.tensors, &inv.host_tensors})
    for (const tensor_spec& t : *list)
      if (t.role == tensor_role::trained_weights) return t.bytes;
  return 0;
}

// Bytes the optimizer step reads and writes on this GPU (or its host, when offloaded): the gradient it
// reads (the fp32 accumulation buffer when there is one), the master copy read and written (or the
// weights, when there is none), the low-precision weights written from it, each state read and written.
// Communication buffers are not part of the update.
std::uint64_t optimizer_traffic_bytes(const inventory& inv, const precision_layout& layout) {
  const char* what = "optimizer traffic";
  std::uint64_t bytes = 0, master = 0;
  for (const std::vector<tensor_spec>* list : {&inv.tensors, &inv.host_tensors})
    for (const tensor_spec& t : *list) {
      const bool state = t.role == tensor_role::optimizer_state || t.role == tensor_role::optimizer_temporary ||
                         t.role == tensor_role::master_weights || t.role == tensor_role::gradients;
      if (!state) continue;  // communication buffers are not part of the update
      // A stack's per-parameter gradients may be one buffer per layer (they appear layer by layer).
      const std::uint64_t all = checked_mul(t.bytes, t.instances(), what);
      if (t.category == tensor_category::optimizer) bytes = checked_add(bytes, checked_mul(all, 2, what), what);
      if (t.category == tensor_category::master_weights) master = all;
      if (t.category == tensor_category::gradients && t.type == layout.optimizer_grad_dtype())
        bytes = checked_add(bytes, all, what);
    }
  const std::uint64_t weights = trained_weight_bytes(inv);
  if (layout.master) return checked_add(bytes, checked_add(checked_mul(master, 2, what), weights, what), what);
  return checked_add(bytes, checked_mul(weights, 2, what), what);
}


// Where a run's collectives run: the GPU's cluster (gpu_spec::cluster) with the GPUs of each node the run uses:
// as many as the preset holds, spread evenly over as few nodes as hold the run (cli/cluster_options.cpp resolves
// --nodes and --gpus-per-node into the preset's gpus_per_node). nullopt, with the reason in `why`, where
// communication is not modelled: one GPU, no cluster, a stack that lists no collectives, or a layout the cluster
// cannot hold.
// The preset is used as it is (a GPU's cluster, shared by every configuration a sweep or search evaluates); a run
// that spreads fewer GPUs a node than the preset holds gets a copy with that many, measured curves and all.
struct comm_layout {
  const cluster_spec* preset = nullptr;  // the GPU's cluster, which outlives the evaluation
  std::optional<cluster_spec> narrowed;  // the preset with fewer GPUs a node; nullopt: the preset's own
  const cluster_spec& cluster() const { return narrowed ? *narrowed : *preset; }
};
std::optional<comm_layout> communication_layout(const run_config& run, const gpu_spec& gpu, const stack_profile& profile,
                                                std::string& why) {
  why.clear();
  if (run.gpus <= 1) return std::nullopt;
  if (!profile.communication) {
    why = fmt::format("the {} profile lists no collectives", profile.name);
    return std::nullopt;
  }
  if (!gpu.cluster) {
    why = fmt::format("GPU {} has no cluster: give --cluster NAME (plan clusters)", gpu.name);
    return std::nullopt;
  }
  const cluster_spec& preset = *gpu.cluster;
  const std::uint64_t per_node = std::max<std::uint64_t>(preset.gpus_per_node, 1);
  const std::uint64_t nodes = (run.gpus + per_node - 1) / per_node;
  if (run.gpus % nodes != 0) {
    why = fmt::format("{} GPUs do not spread evenly over {} nodes of {}", run.gpus, nodes, preset.name);
    return std::nullopt;
  }
  if (nodes > 1 && !preset.has_network()) {
    why = fmt::format("{} has no network between nodes (at most {} GPUs)", preset.name, preset.gpus_per_node);
    return std::nullopt;
  }
  comm_layout at{&preset, std::nullopt};
  if (run.gpus / nodes != preset.gpus_per_node) {
    at.narrowed = preset;
    at.narrowed->gpus_per_node = run.gpus / nodes;
  }
  return at;
}

// The model and facts a GPU's collectives are sized from: with pipeline parallelism, the first stage's (its layers,
// and the embedding: the stage whose gradients and gathers are largest but for the head).
model_spec comm_model(const model_spec& model, const run_config& run, const model_facts&) {
  return run.pp > 1 ? pipeline_stage_model(model, 0, run.pp, run.vpp) : model;
}
model_facts comm_facts(const model_spec& model, const run_config& run, const model_facts& facts) {
  if (run.pp <= 1) return facts;
  return pipeline_stage_facts(pipeline_stage_model(model, 0, run.pp, run.vpp), true, false);
}

}  // namespace

// The peak (the tensors plus the overhead lines), and from it and the allocator replay (when it ran) the
// verdict and the headroom against the budget. The headroom is signed: with the peak below 2^63 and a GPU's
// memory at most 2^50 (planner/io/catalog.cpp), it is exact. A peak beyond 8 EiB is no plan at all (it once
// saturated the headroom at -2^63).
void set_peak_and_verdict(plan_result& r, std::uint64_t budget_bytes) {
  const runtime_overhead& o = r.overhead;
  r.peak_bytes = checked_add(
      r.tensor_peak_bytes,
      checked_add(o.cuda_context_bytes,
                  checked_add(o.cublas_workspace_bytes, checked_add(o.nccl_bytes, o.allocator_slack_bytes, "overhead"), "overhead"),
                  "overhead"),
      "peak bytes");
  if (r.peak_bytes > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    throw input_error(fmt::format("peak bytes ({}) is beyond 2^63 (8 EiB): too large to plan for any GPU", r.peak_bytes));
  r.fits = r.peak_bytes <= budget_bytes && r.host_fits && !(r.allocator && r.allocator->out_of_memory);
  r.headroom_bytes = static_cast<std::int64_t>(budget_bytes) - static_cast<std::int64_t>(r.peak_bytes);
}

plan_result evaluate_plan(const model_spec& model, const run_config& asked, const gpu_spec& gpu,
                          const calibration& calib, const plan_options& options) {
  // The run on this GPU: its compute capability decides the kernels the stack's libraries pick (run_config).
  run_config on_gpu = asked;
  on_gpu.gpu_capability = gpu.capability;
  const run_config& run = on_gpu;
  validate_model(model);
  validate_run(model, run);
  plan_result r;
  r.run = run;
  r.gpu_memory_bytes = gpu.memory_bytes;
  if (options.copy_specs) {
    r.model = model;
    r.gpu = gpu;
    r.calib = calib;
  }
  r.layout = make_precision_layout(run.precision, run.grad_dtype);
  model_facts local;
  const model_facts* facts = options.facts;
  if (!facts) {
    local = describe_model(model);
    facts = &local;
  }
  r.params = facts->counts;

  auto peak = gpu.peak_flops_per_s(r.layout.compute);
  if (!peak)
    throw input_error(fmt::format("GPU {} has no {} tensor throughput in gpus.json; precision {} cannot run on it",
                                  gpu.name, dtype_name(r.layout.compute), precision_name(run.precision)));

  // What the run's stack can train (its own checks), before anything of it is built.
  const stack_profile& profile = profile_of(run);
  check_run(model, run, r.layout);

  // A sweep's previous configuration of this model and run, accumulation aside (plan_reuse).
  plan_reuse* reuse = run.pp == 1 && options.detail == timeline_detail::peak ? options.reuse : nullptr;
  if (reuse) {
    run_config key = run;
    key.grad_accum = 0;
    if (reuse->model != &model || reuse->facts != facts || !(reuse->run == key)) {
      reuse->inv = profile.build_inventory(model, run, r.layout, *facts, {});
      reuse->timelines = {};
      reuse->micro_batch_ops.reset();
      reuse->replays.clear();
      reuse->model = &model, reuse->facts = facts, reuse->run = key;
    }
    r.inv = reuse->inv;
  } else if (run.pp == 1) {
    r.inv = profile.build_inventory(model, run, r.layout, *facts, {});
  } else {
    // Every pipeline GPU holds its own layers' weights, gradients and optimizer state (planner/run/pipeline.hpp);
    // the first also the embedding and the most micro-batches in flight, the last the head and the logits.
    // A middle GPU holds what the first does less the embedding and fewer micro-batches, so the first and the
    // last bound the rest; with dense first layers (DeepSeek-V3) the first GPU may hold lighter layers than
    // the next, so the first GPU of MoE layers alone is a candidate too. The worst is what the GPUs must hold.
    std::vector<std::uint64_t> candidates{0, run.pp - 1};
    if (model.dense_layers > 0) {
      const std::uint64_t stage_layers = model.layers / run.pp, first_moe = (model.dense_layers + stage_layers - 1) / stage_layers;
      if (first_moe > 0 && first_moe < run.pp - 1) candidates.push_back(first_moe);
    }
    std::uint64_t best_peak = 0;
    bool have = false;
    for (const std::uint64_t j : candidates) {
      const model_spec stage_model = pipeline_stage_model(model, j, run.pp, run.vpp);
      const bool first = j == 0, last = j == run.pp - 1;
      const model_facts stage_facts = pipeline_stage_facts(stage_model, first, last);
      // The activations: `chunks` forwards of one model chunk (L/(p v) layers) in flight, of which `first_chunk`
      // are of the chunk that holds the embedding (planner/run/pipeline.hpp).
      const std::uint64_t chunks = pipeline_chunks_in_flight(j, run.pp, run.vpp, run.grad_accum);
      model_spec chunk_model = stage_model;
      chunk_model.layers = stage_model.layers / run.vpp;
      inventory inv = profile.build_inventory(chunk_model, run, r.layout, stage_facts,
                                              {first, last, chunks, pipeline_first_chunk_in_flight(chunks, run.pp, run.vpp)});
      const std::uint64_t peak_bytes = walk_timeline(inv, run.grad_accum, timeline_detail::peak).peak.live_bytes;
      if (have && peak_bytes <= best_peak) continue;
      have = true;
      best_peak = peak_bytes;
      r.inv = std::move(inv);
      const std::string held =
          run.vpp == 1 ? fmt::format("{} micro-batch{} in flight", chunks, chunks == 1 ? "" : "es")
                       : fmt::format("{} chunk forwards of {} layers in flight", chunks, chunk_model.layers);
      if (first && last)
        r.pipeline_stage = fmt::format("the only stage: {} layers", stage_model.layers);
      else if (first)
        r.pipeline_stage = fmt::format("first of {} pipeline stages: embedding and {} layers, {}", run.pp,
                                       stage_model.layers, held);
      else if (last)
        r.pipeline_stage = fmt::format("last of {} pipeline stages: {} layers and the head, {}", run.pp, stage_model.layers, held);
      else
        r.pipeline_stage = fmt::format("stage {} of {}, the first without dense layers: {} layers, {}", j + 1, run.pp,
                                       stage_model.layers, held);
    }
  }
  r.cublas_workspaces_in_replay = replay_makes_cublas_workspaces(r);
  for (const tensor_spec& t : r.inv.host_tensors) r.host_bytes = checked_add(r.host_bytes, t.bytes, "host memory");
  r.host_fits = run.host_memory_bytes == 0 || r.host_bytes <= run.host_memory_bytes;
  r.trainable_params = run.finetune == finetune_kind::full ? r.params.total : lora_params(model, run.lora_rank, run.lora_targets, profile.traits);
  if (reuse) {
    std::optional<timeline_result>& known = reuse->timelines[run.grad_accum > 1 ? 1 : 0];
    if (!known) known = walk_timeline(r.inv, run.grad_accum, options.detail);
    r.timeline = *known;
  } else {
    r.timeline = walk_timeline(r.inv, run.grad_accum, options.detail);
  }
  r.tensor_peak_bytes = r.timeline.peak.live_bytes;

  // The stack's process: its CUDA context and cuBLAS workspaces (data/calibration.json unless the stack knows
  // its own), and, unless its allocator is replayed below, the calibrated share of the tensor peak its cache
  // holds unused.
  const stack_overhead fixed = profile.overhead(calib);
  r.overhead.cuda_context_bytes = fixed.cuda_context_bytes;
  r.overhead.cublas_workspace_bytes = fixed.cublas_workspace_bytes;
  const double slack_fraction = profile.slack_fraction(calib);
  const double slack = std::floor(static_cast<double>(r.tensor_peak_bytes) * slack_fraction);
  if (slack >= static_cast<double>(std::numeric_limits<std::uint64_t>::max()))
    throw input_error("allocator slack is larger than 64 bits can hold");
  r.overhead.allocator_slack_bytes = static_cast<std::uint64_t>(slack);
  // The step's collectives, and NCCL's buffers for them, before the peak: NCCL holds those outside the cache.
  const std::optional<comm_layout> comm_at = communication_layout(run, gpu, profile, r.comm_not_modelled);
  if (comm_at) {
    r.comm = profile.communication(comm_model(model, run, *facts), run, r.layout, comm_facts(model, run, *facts));
    r.overhead.nccl_bytes = static_cast<std::uint64_t>(nccl_memory_bytes(r.comm, comm_at->cluster(), run));
  }
  set_peak_and_verdict(r, gpu.memory_bytes);
  // A peak-only evaluation leaves the replay (about a millisecond; 1 to 15 for a run that does not fit) to its
  // caller: sweeps and charts apply it to every point, searches only where it can change the verdict.
  if (options.detail != timeline_detail::peak || options.replay_at_peak) apply_allocator_replay(r, *facts, gpu.memory_bytes);

  r.flops = count_flops(model, run, r.params, profile.traits);
  // PCIe traffic of offloading per step (Ren et al. 2021, ZeRO-Offload: gradients to the host, updated
  // weights back; Rajbhandari et al. 2021, ZeRO-Infinity: every weight streamed in for each forward and
  // backward of each micro-batch).
  double pcie_bytes = 0;
  for (const tensor_spec& t : r.inv.host_tensors)
    if (t.category == tensor_category::weights) pcie_bytes += 2.0 * static_cast<double>(run.grad_accum) * t.bytes;
  if (run.offload == offload_mode::optimizer || run.offload == offload_mode::both) {
    for (const tensor_spec& t : r.inv.tensors)
      if (t.role == tensor_role::gradients)  // down as gradients, up as weights of the same size
        pcie_bytes += 2.0 * static_cast<double>(t.bytes) * static_cast<double>(t.instances());
  }
  // What the optimizer updates on this GPU: ZeRO shards it over data (and context) parallelism, tp and pp split it.
  double trained_tensors = 0;
  if (run.finetune == finetune_kind::full) {
    trained_tensors = static_cast<double>(facts->tensor_instances);  // counted once per model (describe_model)
  } else {
    trained_tensors = 2.0 * lora_linears(model, run.lora_targets, profile.traits) * static_cast<double>(model.layers);  // A and B
  }
  const double shards = static_cast<double>(run.tp * run.pp) * (run.zero >= 1 ? static_cast<double>(run.data_context_parallel()) : 1.0);
  // The three figures depend on the model, the inventory and the run's sharding, not on the accumulation:
  // a reused inventory's ops are reused with it.
  const trained_share trained{static_cast<double>(r.trainable_params) / shards, trained_tensors / static_cast<double>(run.pp),
                              static_cast<double>(optimizer_traffic_bytes(r.inv, r.layout))};
  if (reuse) {
    if (!reuse->micro_batch_ops) reuse->micro_batch_ops = profile.micro_batch_ops(model, run, r.layout, trained);
    r.ops = *reuse->micro_batch_ops;
  } else {
    r.ops = profile.micro_batch_ops(model, run, r.layout, trained);
  }
  repeat_micro_batches(r.ops, run.grad_accum);
  const timing_constants& timing = calib.timing(calibration_name(profile));
  std::optional<comm_time> comm_seconds;
  if (comm_at) {
    const comm_windows windows =
        windows_of(r.ops, roofline_rates(*peak, gpu.memory_bandwidth_bytes_per_s, timing, r.ops.fp32_gemms), run.grad_accum);
    comm_seconds = overlap_communication(r.comm, windows, comm_at->cluster(), run, gpu.sm_count);
  }
  r.time = estimate_step_time(r.flops, r.ops, *peak, gpu.memory_bandwidth_bytes_per_s, timing, run.tp * run.cp * run.pp,
                              run.data_parallel(), pcie_bytes / gpu.host_link_bytes_per_s,
                              pipeline_bubble_fraction(run.pp, run.vpp, run.grad_accum), comm_seconds ? &*comm_seconds : nullptr);
  // The catalog's ranges keep the roofline finite; this guards the report against a nan or inf step time
  // (tokens/s, MFU and training time all divide by it) should any other input still reach one.
  if (!std::isfinite(r.time.step_seconds) || !(r.time.step_seconds > 0) || !std::isfinite(r.time.tokens_per_second))
    throw input_error(fmt::format("the step time of {} on {} is not a finite positive number: check the timing constants "
                                  "of calibration.json and the GPU's entry in gpus.json", model.name, gpu.name));
  return r;
}

}  // namespace trainplan
