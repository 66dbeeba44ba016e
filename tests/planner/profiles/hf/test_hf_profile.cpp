// --framework hf against real PyTorch 2.11 + transformers 5.17 training steps on an H100
// (tests/data/measurements/): the tensor peak (max_memory_allocated) of every configuration.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "planner/model/model_facts.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/allocator/allocator_trace.hpp"
#include "planner/evaluate/plan.hpp"
#include "tests/support/measured_runs.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;

namespace {

// What memory_allocated counts at the peak: every tensor, and PyTorch's cuBLAS workspaces, which it
// allocates through its caching allocator.
std::uint64_t predicted_allocated(const plan_result& p) { return p.tensor_peak_bytes + p.overhead.cublas_workspace_bytes; }

double error_pct(double predicted, double measured) { return 100.0 * (predicted - measured) / measured; }

}  // namespace

TEST_CASE("hf profile: the shared H100 runs' parameter counts are the planner's exact counts", "[measured][framework][hf]") {
  for (const measured_run& r : test::shared_h100_measurements().runs) {
    INFO(r.id);
    CHECK(describe_model(r.model).counts.total == r.params);
  }
}

TEST_CASE("hf profile: each shared H100 run's tensor peak is predicted within 3%", "[measured][framework][hf]") {
  const gpu_spec& h100 = test::data().gpu("h100");
  const calibration calib = test::data().calibration_for(h100);
  std::string table = "run   measured GiB  predicted GiB   error\n";
  double worst = 0;
  for (const measured_run& r : test::shared_h100_measurements().runs) {
    const plan_result p = evaluate_plan(r.model, r.run, h100, calib);
    const double err = error_pct(static_cast<double>(predicted_allocated(p)), static_cast<double>(r.alloc_peak_bytes));
    worst = std::max(worst, std::abs(err));
    table += fmt::format("{:<5} {:>12.3f} {:>14.3f} {:>+7.2f}%  at {}\n", r.id, r.alloc_peak_bytes / 1073741824.0,
                         predicted_allocated(p) / 1073741824.0, err, phase_name(p.timeline.peak));
    INFO(r.id << ": predicted " << predicted_allocated(p) << " measured " << r.alloc_peak_bytes);
    // Tolerance: issue 9's 3%. What is not modelled (allocator rounding of unsplit blocks, scalars,
    // cuBLASLt workspaces) measured 10-35 MB here, under 0.7% of the smallest peak.
    CHECK(std::abs(err) <= 3.0);
  }
  WARN(table << fmt::format("largest error {:.2f}%", worst));
}

TEST_CASE("hf profile: device peak (context + simulated caching allocator) of the shared H100 runs", "[measured][framework][hf][allocator]") {
  // The shared file measured its 14 runs one after another in one process (mark_one_process): from the second
  // on, the cuBLAS workspaces the first made were there, and no run requested its own. That is what moved the
  // checkpointed GPT-2's loss off a fourth [b*s, V] fp32 segment (786 MiB) that a run of its own reserves; with
  // the backward replayed op by op (planner/profiles/hf/activations_hf_backward.hpp) the replay reserves what the
  // shared run did. The fp32 Llama on SDPA's math path was 6% under until its recorded history showed a third
  // s x s buffer in every layer's softmax backward (the momentary layer{}.bwd.softmax_grad_temp).
  measured_file f = test::shared_h100_measurements();
  mark_one_process(f);
  const gpu_spec& h100 = test::data().gpu("h100");
  const calibration calib = test::data().calibration_for(h100);
  std::string table = "run   reserved GiB  simulated   error | alloc peak  simulated  error\n";
  for (const measured_run& r : f.runs) {
    const plan_result p = evaluate_plan(r.model, r.run, h100, calib);
    const allocator_replay sim = replay_schedule(plan_allocator_schedule(p, describe_model(r.model)));
    const double ws = static_cast<double>(p.overhead.cublas_workspace_bytes);
    const double reserved = sim.peak_reserved_bytes + ws, allocated = sim.peak_allocated_bytes + ws;
    table += fmt::format("{:<5} {:>12.3f} {:>10.3f} {:>+6.1f}% | {:>10.3f} {:>10.3f} {:>+6.1f}%\n", r.id,
                         r.reserved_peak_bytes / 1073741824.0, reserved / 1073741824.0,
                         error_pct(reserved, static_cast<double>(r.reserved_peak_bytes)), r.alloc_peak_bytes / 1073741824.0,
                         allocated / 1073741824.0, error_pct(allocated, static_cast<double>(r.alloc_peak_bytes)));
    INFO(r.id);
    CHECK(std::abs(error_pct(allocated, static_cast<double>(r.alloc_peak_bytes))) <= 3.0);
    // Tolerance 0.5% of the reserved bytes, every run: the replay makes the segments PyTorch made, and what it
    // misses is a few small segments and workspace blocks (0.31% the largest when written, 18 MiB of 5.8 GiB).
    // A run on an allocator edge that the replay walks differently is off by a whole segment of the loss's
    // size, 786 MiB for GPT-2 at b4 s1024: the checkpointed GPT-2 was +16% while the replay made the
    // workspaces the process already held, or walked the backward coarsely.
    CHECK(std::abs(error_pct(reserved, static_cast<double>(r.reserved_peak_bytes))) <= 0.5);
  }
  WARN(table);
}

TEST_CASE("hf profile: Llama-2-7B in pure bf16 with checkpointing on an H100, as issue 14 measured it", "[framework][hf]") {
  // Issue 14: model.to(bfloat16), gradient checkpointing, s4096 b1, fused AdamW used 53.4 GiB at the
  // device level on a real H100 (torch 2.11, transformers 5.17). A run the profile was not built from.
  const gpu_spec& h100 = test::data().gpu("h100");
  run_config run;
  run.profile = &profile_named("hf");
  run.precision = precision_regime::bf16;
  run.recompute = recompute_mode::full;
  run.optimizer_impl = optimizer_impl_kind::fused;
  run.seq = 4096;
  const plan_result p = evaluate_plan(test::data().model("llama-2-7b").spec, run, h100, test::data().calibration_for(h100));
  const double measured = 53.4 * 1073741824.0;
  const double replayed = static_cast<double>(p.overhead.cuda_context_bytes + p.allocator_reserved_bytes);
  WARN("7B bf16 checkpointed: device peak " << p.peak_bytes / 1073741824.0 << " GiB (allocator replay "
                                            << replayed / 1073741824.0 << " GiB), measured 53.4 GiB");
  CHECK(std::abs(static_cast<double>(p.peak_bytes) - measured) <= 0.05 * measured);  // issue 9's 5% at the device level
  CHECK(std::abs(replayed - measured) <= 0.05 * measured);
}

namespace {

// The inventories list every tensor autograd held after the forward (unique storages; parameters marked).
// The profile's buffers live from the forward into the backward are the prediction of that, less what the
// training loop holds (the returned logits, the batch's labels) and plus nothing else. Compares each run of
// a measurement file that has an inventory, dtype by dtype; returns how many it compared.
int compare_saved_inventories(const std::string& path, const measured_file& f, std::string& table) {
  std::ifstream in(path);
  REQUIRE(in);
  const gpu_spec& h100 = test::data().gpu("h100");
  const calibration calib = test::data().calibration_for(h100);
  int compared = 0;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (!j.contains("inventory") || j["inventory"].is_null()) continue;
    const auto run = std::find_if(f.runs.begin(), f.runs.end(), [&](const measured_run& r) { return r.id == j["id"]; });
    REQUIRE(run != f.runs.end());
    std::map<std::string, double> measured, predicted;
    for (const auto& row : j["inventory"]) {
      if (row["param"].get<bool>()) continue;  // the model's own parameters are not activations
      const std::string t = row["dtype"];
      const std::string d = t == "float32" ? "fp32" : t == "bfloat16" ? "bf16" : t == "float16" ? "fp16" : t == "bool" ? "u8" : t == "int64" ? "i64" : t;
      measured[d] += row["unique_bytes"].get<double>();
    }
    plan_options o;
    o.detail = timeline_detail::peak_and_live;
    const plan_result p = evaluate_plan(run->model, run->run, h100, calib, o);
    const std::int64_t L = static_cast<std::int64_t>(p.inv.layers);
    const std::int64_t loss = event_index(event_kind::loss, 0, L), bwd_head = event_index(event_kind::bwd_head, 0, L);
    for (const tensor_spec& t : p.inv.tensors) {
      if (t.lifetime != state_lifetime::micro_batch || t.name == "logits" || t.name == "batch.labels") continue;
      // Saved: live at the end of the forward (the loss) and still live when the backward starts.
      const std::uint64_t n = std::min(instances_live(t, loss), instances_live(t, bwd_head));
      predicted[std::string(dtype_name(t.type))] += static_cast<double>(n * t.bytes);
    }
    for (const auto& [d, bytes] : measured) {
      if (bytes < 1e6) continue;  // scalars and a few KB of indices
      table += fmt::format("{:<5} {:<6} {:>11.1f} {:>13.1f}\n", run->id, d, bytes / 1e6, predicted[d] / 1e6);
      INFO(path << " " << run->id << " " << d << ": measured " << bytes << ", predicted " << predicted[d]);
      // Tolerance: 64 KiB per dtype, for what the profile leaves out on purpose (LayerNorm's mean and rstd
      // are counted, but not RNG seeds, loss scalars and total_weight, a few hundred bytes each).
      CHECK(std::abs(predicted[d] - bytes) <= 65536.0);
    }
    ++compared;
  }
  return compared;
}

}  // namespace

TEST_CASE("hf profile: what autograd saved, dtype by dtype, in the 8 measured inventories", "[measured][framework][hf]") {
  std::string table = "run   dtype  measured MB  predicted MB\n";
  const std::string path = test::shared_measurements_dir() + "/pytorch-hf-h100-2026-11-22.jsonl";
  CHECK(compare_saved_inventories(path, test::shared_h100_measurements(), table) == 8);
  WARN(table);
}

TEST_CASE("hf profile: what autograd saved in the project's own measured inventories", "[framework][hf][measured]") {
  // The collector's runs (data/measurements/): Mistral, Qwen2 and Phi-3 shapes, amp-fp16, accumulation,
  // s4096 and s8192, fp32 and eager attention, besides the shared configurations measured again.
  std::string table = "run   dtype  measured MB  predicted MB\n";
  int compared = 0;
  for (const char* name : {"pytorch-hf-h100-2026-11-26-extra.jsonl", "pytorch-hf-h100-2026-11-26-extra-2.jsonl",
                           "pytorch-hf-h100-2026-11-26-gaps.jsonl", "pytorch-hf-h100-2026-11-26-histories.jsonl",
                           "pytorch-hf-h100-2026-11-27-extra.jsonl", "pytorch-hf-h100-2026-11-27-shared.jsonl"}) {
    INFO(name);
    compared += compare_saved_inventories(test::project_measurements_dir() + "/" + name, test::project_measurements(name), table);
  }
  CHECK(compared == 44);
  WARN(table);
}

TEST_CASE("hf Gemma 2: post-norms keep their fp32 tensors, soft caps keep tanh's outputs", "[framework][hf][gemma]") {
  // Per layer, each of the two post-norms keeps its fp32 input, rsqrt and normalised tensor (4bsh + 4bs +
  // 4bsh bytes); eager attention with a soft cap keeps tanh's output over the scores (2 a s^2 b in bf16); the
  // final soft cap keeps one more logits-sized tensor (2 b s V).
  const model_spec& gemma = test::data().model("gemma-2-9b").spec;
  run_config r;
  r.profile = &profile_named("hf");
  r.precision = precision_regime::bf16;
  r.seq = 1024, r.micro_batch = 2;
  auto per_layer = [&](const model_spec& m, attention_kind a) {
    run_config x = r;
    x.attention = a;
    return build_inventory(m, x, make_precision_layout(x.precision, x.grad_dtype)).activations_per_layer_bytes;
  };
  model_spec plain = gemma;
  plain.norms_per_layer = 2, plain.attn_logit_softcap = 0, plain.final_logit_softcap = 0;
  const std::uint64_t b = 2, s = 1024, h = 3584, a = 16, V = 256000;
  CHECK(per_layer(gemma, attention_kind::flash) - per_layer(plain, attention_kind::flash) == 2 * (8 * b * s * h + 4 * b * s));
  CHECK(per_layer(gemma, attention_kind::eager) - per_layer(plain, attention_kind::eager) ==
        2 * (8 * b * s * h + 4 * b * s) + 2 * a * s * s * b);
  const inventory inv = build_inventory(gemma, r, make_precision_layout(r.precision, r.grad_dtype));
  const auto tanh = std::find_if(inv.tensors.begin(), inv.tensors.end(),
                                 [](const tensor_spec& t) { return t.name == "logits.softcap_tanh"; });
  REQUIRE(tanh != inv.tensors.end());
  CHECK(tanh->bytes == 2 * b * s * V);
}
