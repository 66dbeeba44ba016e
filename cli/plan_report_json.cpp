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
                {"max_positions", m.max_positions},
                {"tied_embeddings", m.tied_embeddings},
                {"qkv_bias", m.qkv_bias},
                {"norms_per_layer", m.norms_per_layer},
                {"mlp_gate", gate_activation_name(m.mlp_gate)},
                {"embed_scale_sqrt_hidden", m.embed_scale_sqrt_hidden},
                {"attn_logit_softcap", m.attn_logit_softcap},
                {"final_logit_softcap", m.final_logit_softcap},
                {"sliding_window_tokens", m.sliding_window_tokens},
                {"sliding_window_global_every", m.sliding_window_global_every},
                {"experts", m.experts},
                {"experts_per_token", m.experts_per_token},
                {"shared_expert_ffn", m.shared_expert_ffn},
                {"qk_norm", m.qk_norm},
                {"shared_expert_gate", m.shared_expert_gate},
                {"dense_layers", m.dense_layers},
                {"dense_ffn", m.dense_ffn},
                {"router_score_bias", m.router_score_bias},
                {"kv_lora_rank", m.kv_lora_rank},
                {"q_lora_rank", m.q_lora_rank},
                {"rope_head_dim", m.rope_head_dim},
                {"v_head_dim", m.v_dim()},
                {"active_params", p.params.active},
                {"trainable_params", p.trainable_params},
                {"source", m.source}};
  j["run"] = {{"seq", run.seq},
              {"micro_batch", run.micro_batch},
              {"grad_accum", run.grad_accum},
              {"global_batch", run.global_batch()},
              {"ep", run.ep},
              {"capacity_factor", run.capacity_factor},
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
              {"pp", run.pp},
              {"vpp", run.vpp},
              {"pipeline_stage", p.pipeline_stage},
              {"sequence_parallel", run.sequence_parallel},
              {"zero", run.zero},
              {"offload", offload_name(run.offload)},
              {"finetune", finetune_name(run.finetune)},
              {"lora_rank", run.lora_rank},
              {"lora_targets", lora_targets_text(run.lora_targets)},
              {"lora_dtype", run.lora_fp32 ? "fp32" : "model"},
              {"lora_dropout", run.lora_dropout}};
  json host_tensors = json::array();
  for (const tensor_spec& t : p.inv.host_tensors)
    host_tensors.push_back({{"name", std::string(t.name)}, {"dtype", dtype_name(t.type)}, {"bytes", t.bytes}});
  j["host"] = {{"memory_bytes", p.host_bytes},
               {"limit_bytes", run.host_memory_bytes},
               {"fits", p.host_fits},
               {"tensors", host_tensors}};
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
  j["memory"] = {{"weights_bytes", p.category_bytes(tensor_category::weights)},
                 {"master_weights_bytes", p.category_bytes(tensor_category::master_weights)},
                 {"gradients_bytes", p.category_bytes(tensor_category::gradients)},
                 {"optimizer_bytes", p.category_bytes(tensor_category::optimizer)},
                 {"activations_bytes", p.category_bytes(tensor_category::activations)},
                 {"activations_per_layer_bytes", p.inv.activations_per_layer_bytes},
                 {"activations_all_layers_bytes", p.inv.activations_all_layers_bytes},
                 {"logits_bytes", p.category_bytes(tensor_category::logits)},
                 {"activation_grads_bytes", p.category_bytes(tensor_category::activation_grads)},
                 {"overhead_bytes", p.overhead.total()},
                 {"overhead", {{"cuda_context_bytes", p.overhead.cuda_context_bytes},
                               {"cublas_workspace_bytes", p.overhead.cublas_workspace_bytes},
                               {"allocator_slack_bytes", p.overhead.allocator_slack_bytes},
                               {"nccl_bytes", p.overhead.nccl_bytes}}},
                 {"tensor_peak_bytes", p.tensor_peak_bytes},
                 {"allocator_reserved_bytes", p.allocator_reserved_bytes},
                 {"peak_bytes", p.peak_bytes},
                 {"peak_phase", phase_name(p.timeline.peak)},
                 {"peak_when", describe_point(p.timeline.peak, run.grad_accum)},
                 {"headroom_bytes", p.headroom_bytes},
                 {"tensors_at_peak", tensors}};
  // The allocator replay behind the peak and the verdict (where replays_allocator), or null where the slack
  // estimate stands.
  if (p.allocator) {
    const allocator_replay& a = *p.allocator;
    j["memory"]["allocator"] = {{"replayed_steps", 3},
                                {"peak_reserved_bytes", a.peak_reserved_bytes},
                                {"peak_allocated_bytes", a.peak_allocated_bytes},
                                // max_memory_reserved() in the GPU's memory (cache kept); peak_reserved_bytes is the
                                // least memory the replay completes in where the allocator runs short
                                {"budget_reserved_bytes", a.budget_reserved_bytes},
                                {"cache_releases", a.cache_releases},
                                // cudaMalloc calls in the GPU's memory (memory_stats()'s num_device_alloc)
                                {"segments_made", a.segments_made},
                                // one segment of the loss's [b*s, V] fp32 size: the replay's larger misses on
                                // measured runs were about one such segment (with expandable segments: null)
                                {"loss_segment_bytes", p.loss_segment_bytes ? nlohmann::json(*p.loss_segment_bytes)
                                                                            : nlohmann::json()},
                                // after another run in the same process (cuBLAS workspaces made already);
                                // null where not replayed so (planner/evaluate/plan.hpp, reserved_after_another_run)
                                {"reserved_after_another_run_bytes", p.reserved_after_another_run_bytes
                                                                         ? nlohmann::json(*p.reserved_after_another_run_bytes)
                                                                         : nlohmann::json()},
                                {"out_of_memory", a.out_of_memory},
                                // the tensors alone would fit: the shortfall is fragmentation
                                {"tensors_fit", a.tensors_fit},
                                {"failed_buffer", a.out_of_memory ? nlohmann::json(std::string(a.failed_tensor)) : nlohmann::json()},
                                {"failed_step", a.out_of_memory ? nlohmann::json(a.failed_step + 1) : nlohmann::json()}};
  } else {
    j["memory"]["allocator"] = nullptr;
  }
  // Where the allocator is replayed: the buffer instances of a model too large to replay (the estimate stands); 0
  // otherwise
  j["memory"]["allocator_replay_skipped_instances"] = p.allocator_replay_skipped_instances;
  j["fits"] = p.fits;
  // fits, with less headroom than the calibration's safety margin (what plan search keeps free)
  j["tight"] = check.tight;
  j["safety_margin_fraction"] = p.calib.safety_margin_fraction;
  j["flops"] = {{"model_per_step", p.flops.model_per_step},
                {"hardware_per_step", p.flops.hardware_per_step},
                {"recompute_per_step", p.flops.recompute_per_step},
                {"masked_attention_per_step", p.flops.masked_attention_per_step},
                {"six_n_per_step", p.flops.six_n_per_step}};
  j["time"] = {{"step_seconds", p.time.step_seconds},
               {"compute_seconds", p.time.compute_seconds},
               {"optimizer_seconds", p.time.optimizer_seconds},
               {"offload_seconds", p.time.offload_seconds},
               {"tokens_per_second", p.time.tokens_per_second},
               {"mfu", p.time.mfu},
               {"hfu", p.time.hfu},
               {"host_seconds", p.time.breakdown.host_seconds},
               {"device_seconds", p.time.breakdown.device_seconds}};
  json breakdown = json::object();
  for (std::size_t c = 0; c < op_class_count; ++c)
    breakdown[std::string(op_class_name(static_cast<op_class>(c)))] = p.time.breakdown.seconds[c];
  j["time"]["breakdown"] = breakdown;
  {
    // The step's collectives (null where communication is not modelled, with the reason).
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
      j["time"]["communication"] = nullptr;
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
                {"cost", suggestion_cost_text(s.costs)},
                {"roomiest", nullptr}};
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
