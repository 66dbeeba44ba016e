// The fit check's report as one JSON object (plan_report.hpp, render_plan_json): the model, the run, the memory
// at the peak with the allocator's replay, the verdict, the time and the suggestions, as the check computed them.
#include <nlohmann/json.hpp>

#include <optional>

#include "cli/plan_report.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/search/levers.hpp"

namespace trainplan::cli {

nlohmann::json render_plan_json(const plan_report_input& in) {
  using json = nlohmann::json;
  const fit_check& check = in.check;
  const plan_result& p = check.plan;
  const model_spec& m = p.model;
  const run_config& run = p.run;
  json j;
  // The format's version: a field renamed or removed, or one whose meaning changes, raises it (docs/json.md).
  j["schema_version"] = 1;
  // A field that does not apply to this plan is absent (not 0, "" or null): docs/json.md says when each appears.
  j["model"] = {{"name", m.name},
                {"family", family_name(m.family)},
                {"params", p.params.total},
                {"params_12lh2_vh", p.params.approx_12lh2_vh},
                {"layers", m.layers},
                {"hidden", m.hidden},
                {"heads", m.heads},
                {"kv_heads", m.kv_heads},
                {"head_dim", m.head_dim},
                {"ffn", m.ffn},
                {"vocab", m.vocab},
                {"tied_embeddings", m.tied_embeddings},
                {"qkv_bias", m.qkv_bias},
                {"norms_per_layer", m.norms_per_layer},
                {"mlp_gate", gate_activation_name(m.mlp_gate)},
                {"embed_scale_sqrt_hidden", m.embed_scale_sqrt_hidden},
                {"qk_norm", m.qk_norm},
                {"active_params", p.params.active},
                {"trainable_params", p.trainable_params},
                {"source", m.source}};
  json& model = j["model"];
  if (m.max_positions > 0) model["max_positions"] = m.max_positions;
  if (m.attn_logit_softcap > 0) model["attn_logit_softcap"] = m.attn_logit_softcap;
  if (m.final_logit_softcap > 0) model["final_logit_softcap"] = m.final_logit_softcap;
  if (m.sliding_window_tokens > 0) {
    model["sliding_window_tokens"] = m.sliding_window_tokens;
    model["sliding_window_global_every"] = m.sliding_window_global_every;
  }
  if (m.is_moe()) {
    model["experts"] = m.experts;
    model["experts_per_token"] = m.experts_per_token;
    model["router_score_bias"] = m.router_score_bias;
    model["dense_layers"] = m.dense_layers;
    if (m.dense_layers > 0) model["dense_ffn"] = m.dense_ffn;
    if (m.shared_expert_ffn > 0) {
      model["shared_expert_ffn"] = m.shared_expert_ffn;
      model["shared_expert_gate"] = m.shared_expert_gate;
    }
  }
  if (m.is_mla()) {
    model["kv_lora_rank"] = m.kv_lora_rank;
    model["q_lora_rank"] = m.q_lora_rank;
    model["rope_head_dim"] = m.rope_head_dim;
    model["v_head_dim"] = m.v_dim();
  }
  j["run"] = {{"seq", run.seq},
              {"micro_batch", run.micro_batch},
              {"grad_accum", run.grad_accum},
              {"global_batch", run.global_batch()},
              {"tokens_per_step", run.seq * run.global_batch()},
              {"framework", profile_of(run).name},
              {"optimizer_impl", optimizer_impl_name(run.optimizer_impl)},
              {"expandable_segments", run.expandable_segments},
              {"precision", precision_name(run.precision)},
              {"grad_dtype", dtype_name(p.layout.optimizer_grad_dtype())},
              {"optimizer", optimizer_name(run.optimizer)},
              {"recompute", recompute_name(run.recompute)},
              {"attention", attention_name(run.attention)},
              {"dropout", run.dropout},
              {"gpus", run.gpus},
              {"data_parallel", run.data_parallel()},
              {"tp", run.tp},
              {"cp", run.cp},
              {"pp", run.pp},
              {"zero", run.zero},
              {"offload", offload_name(run.offload)},
              {"finetune", finetune_name(run.finetune)}};
  json& r = j["run"];
  if (run.loss != loss_kind::standard) r["loss"] = loss_name(run.loss);  // absent: standard
  if (run.loss_chunks > 0) r["loss_chunks"] = run.loss_chunks;
  if (run.packing_doc_tokens > 0) r["packing_doc_tokens"] = run.packing_doc_tokens;
  if (compiles_layers(run)) {  // absent: eager
    r["compile"] = true;
    r["compile_scope"] = compile_scope_name(run.compile);
  }
  if (run.tp > 1) r["sequence_parallel"] = run.sequence_parallel;
  if (run.pp > 1) r["vpp"] = run.vpp;
  if (!p.pipeline_stage.empty()) r["pipeline_stage"] = p.pipeline_stage;
  if (m.is_moe()) {
    r["ep"] = run.ep;
    if (run.capacity_factor > 0) r["capacity_factor"] = run.capacity_factor;  // absent: dropless
  }
  if (run.finetune != finetune_kind::full) {
    r["lora_rank"] = run.lora_rank;
    r["lora_targets"] = lora_targets_text(run.lora_targets);
    r["lora_dtype"] = run.lora_fp32 ? "fp32" : "model";
    r["lora_dropout"] = run.lora_dropout;
  }
  // CPU memory: with offload, or --host-memory given.
  if (!p.inv.host_tensors.empty() || run.host_memory_bytes > 0) {
    json host_tensors = json::array();
    for (const tensor_spec& t : p.inv.host_tensors)
      host_tensors.push_back({{"name", std::string(t.name)}, {"dtype", dtype_name(t.type)}, {"bytes", t.bytes}});
    j["host"] = {{"memory_bytes", p.host_bytes}, {"fits", p.host_fits}, {"tensors", host_tensors}};
    if (run.host_memory_bytes > 0) j["host"]["limit_bytes"] = run.host_memory_bytes;
  }
  j["gpu"] = {{"name", p.gpu.name},
              {"description", p.gpu.description},
              {"memory_bytes", p.gpu.memory_bytes},
              {"peak_tflops", p.time.peak_flops_per_s / 1e12}};

  json tensors = json::array();
  for (const live_tensor& t : p.timeline.live_at_peak)
    tensors.push_back({{"name", std::string(t.spec->name)},
                       {"category", category_name(t.spec->category)},
                       {"shape", t.spec->shape.to_vector()},
                       {"dtype", dtype_name(t.spec->type)},
                       {"instances", t.instances},
                       {"bytes", t.bytes}});
  json overhead = {{"cuda_context_bytes", p.overhead.cuda_context_bytes},
                   {"cublas_workspace_bytes", p.overhead.cublas_workspace_bytes},
                   {"allocator_slack_bytes", p.overhead.allocator_slack_bytes}};
  if (run.gpus > 1) overhead["nccl_bytes"] = p.overhead.nccl_bytes;
  j["memory"] = {{"weights_bytes", p.category_bytes(tensor_category::weights)},
                 {"gradients_bytes", p.category_bytes(tensor_category::gradients)},
                 {"optimizer_bytes", p.category_bytes(tensor_category::optimizer)},
                 {"activations_bytes", p.category_bytes(tensor_category::activations)},
                 {"activations_per_layer_bytes", p.inv.activations_per_layer_bytes},
                 {"activations_all_layers_bytes", p.inv.activations_all_layers_bytes},
                 {"logits_bytes", p.category_bytes(tensor_category::logits)},
                 {"activation_grads_bytes", p.category_bytes(tensor_category::activation_grads)},
                 {"overhead_bytes", p.overhead.total()},
                 {"overhead", overhead},
                 {"tensor_peak_bytes", p.tensor_peak_bytes},
                 {"peak_bytes", p.peak_bytes},
                 {"peak_phase", phase_name(p.timeline.peak)},
                 {"peak_when", describe_point(p.timeline.peak, run.grad_accum)},
                 {"headroom_bytes", p.headroom_bytes},
                 {"tensors_at_peak", tensors}};
  if (p.layout.master) j["memory"]["master_weights_bytes"] = p.category_bytes(tensor_category::master_weights);
  // The allocator replay behind the peak and the verdict, where the stack's allocator is replayed.
  if (p.allocator) {
    const allocator_replay& a = *p.allocator;
    j["memory"]["allocator_reserved_bytes"] = p.allocator_reserved_bytes;
    json replay = {{"replayed_steps", 3},
                   {"peak_reserved_bytes", a.peak_reserved_bytes},
                   {"peak_allocated_bytes", a.peak_allocated_bytes},
                   // max_memory_reserved() in the GPU's memory (cache kept); peak_reserved_bytes is the least
                   // memory the replay completes in where the allocator runs short
                   {"budget_reserved_bytes", a.budget_reserved_bytes},
                   {"cache_releases", a.cache_releases},
                   // cudaMalloc calls in the GPU's memory (memory_stats()'s num_device_alloc)
                   {"segments_made", a.segments_made},
                   {"out_of_memory", a.out_of_memory},
                   // the tensors alone would fit: the shortfall is fragmentation
                   {"tensors_fit", a.tensors_fit}};
    // one segment of the loss's [b*s, V] fp32 size: the replay's larger misses on measured runs were about one
    // such segment (not with expandable segments)
    if (p.loss_segment_bytes) replay["loss_segment_bytes"] = *p.loss_segment_bytes;
    // after another run in the same process (cuBLAS workspaces made already), where it differs
    // (planner/evaluate/plan.hpp, reserved_after_another_run)
    if (p.reserved_after_another_run_bytes) replay["reserved_after_another_run_bytes"] = *p.reserved_after_another_run_bytes;
    if (a.out_of_memory) {
      replay["failed_buffer"] = std::string(a.failed_tensor);
      replay["failed_step"] = a.failed_step + 1;
    }
    j["memory"]["allocator"] = replay;
  }
  // Where the allocator would be replayed: the buffer instances of a model too large to replay (the estimate stands).
  if (p.allocator_replay_skipped_instances > 0)
    j["memory"]["allocator_replay_skipped_instances"] = p.allocator_replay_skipped_instances;
  j["fits"] = p.fits;
  // fits, with less headroom than the calibration's safety margin (what plan search keeps free)
  j["tight"] = check.tight;
  j["safety_margin_fraction"] = p.calib.safety_margin_fraction;
  j["flops"] = {{"model_per_step", p.flops.model_per_step},
                {"hardware_per_step", p.flops.hardware_per_step},
                {"recompute_per_step", p.flops.recompute_per_step},
                {"six_n_per_step", p.flops.six_n_per_step}};
  if (m.sliding_window_tokens > 0) j["flops"]["masked_attention_per_step"] = p.flops.masked_attention_per_step;
  j["time"] = {{"step_seconds", p.time.step_seconds},
               {"compute_seconds", p.time.compute_seconds},
               {"optimizer_seconds", p.time.optimizer_seconds},
               {"tokens_per_second", p.time.tokens_per_second},
               {"mfu", p.time.mfu},
               {"hfu", p.time.hfu},
               {"host_seconds", p.time.breakdown.host_seconds},
               {"device_seconds", p.time.breakdown.device_seconds}};
  json breakdown = json::object();
  for (std::size_t c = 0; c < op_class_count; ++c)
    breakdown[std::string(op_class_name(static_cast<op_class>(c)))] = p.time.breakdown.seconds[c];
  j["time"]["breakdown"] = breakdown;
  if (run.offload != offload_mode::none) j["time"]["offload_seconds"] = p.time.offload_seconds;
  {
    // The step's collectives (absent where communication is not modelled; the reason, where there is one).
    const comm_time& c = p.time.communication;
    if (p.time.communication_modelled) {
      json groups = json::object(), ops = json::array();
      for (std::size_t g = 0; g < comm_group_count; ++g)
        if (c.seconds_by_group[g] > 0)
          groups[std::string(comm_group_name(static_cast<comm_group>(g)))] = {{"seconds", c.seconds_by_group[g]},
                                                                              {"exposed_seconds", c.exposed_by_group[g]}};
      for (const comm_op& op : p.comm.ops)
        ops.push_back({{"name", op.name}, {"collective", collective_name(op.kind)}, {"bytes", op.bytes}, {"count", op.count}});
      j["time"]["communication"] = {{"cluster", p.gpu.cluster ? p.gpu.cluster->name : std::string()},
                                    {"seconds", c.seconds},
                                    {"exposed_seconds", c.exposed_seconds},
                                    {"hidden_seconds", c.hidden_seconds},
                                    {"slowdown_seconds", c.slowdown_seconds},
                                    {"by_group", groups},
                                    {"collectives", ops}};
    } else {
      if (!p.comm_not_modelled.empty()) j["time"]["communication_not_modelled"] = p.comm_not_modelled;
    }
  }
  if (check.training) {
    j["time"]["train_tokens"] = check.training->tokens;
    j["time"]["time_to_train_seconds"] = check.training->seconds;
  }
  json suggestions = json::array();
  for (const fit_suggestion& s : check.suggestions) {
    json one = {{"changes", s.changes},
                {"levers", lever_names(s.levers)},
                {"peak_bytes", s.peak_bytes},
                {"headroom_bytes", s.headroom_bytes},
                {"tight", s.tight},
                {"tokens_per_second", s.tokens_per_second},
                {"changes_training", s.changes_training()},
                {"cost", suggestion_cost_text(s.costs)}};
    // The whole command that runs it: the command line given, with the changes merged in (as the report prints it).
    if (!in.command.empty()) one["command"] = shell_line(suggested_command(in.command, s.changes));
    if (s.roomiest)
      one["roomiest"] = {{"added", s.roomiest->added},
                         {"peak_bytes", s.roomiest->peak_bytes},
                         {"headroom_bytes", s.roomiest->headroom_bytes},
                         {"tight", s.roomiest->tight},
                         {"tokens_per_second", s.roomiest->tokens_per_second}};
    suggestions.push_back(one);
  }
  j["suggestions"] = suggestions;
  j["notes"] = in.notes;
  j["assumptions"] = plan_assumptions(p);
  return j;
}

}  // namespace trainplan::cli
