// The collector's report format (planner/measure/measured_runs.hpp): fields beyond the shared file's.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "planner/util/input_error.hpp"
#include "planner/measure/measured_runs.hpp"
#include "tests/support/measured_runs.hpp"

using namespace trainplan;
using nlohmann::json;

namespace {

// The shared file's env line and its first Llama run, a real line to edit: a Llama of fewer layers than Qwen2's
// max_window_layers (28), which the sliding-window case below needs.
std::pair<std::string, json> llama_line() {
  std::ifstream in(test::shared_measurements_dir() + "/pytorch-hf-h100-2026-11-22.jsonl");
  std::string env, line;
  std::getline(in, env);
  json run;
  while (!run.is_object() && std::getline(in, line))
    if (json j = json::parse(line); j["model"]["fam"] == "llama") run = j;
  REQUIRE(run.is_object());
  REQUIRE(run["model"]["L"].get<int>() < 28);
  return {env, run};
}

// That line with the model object and then the line edited.
measured_run llama_with_model(const json& model_changes, const json& line_changes = json::object()) {
  auto [env, run] = llama_line();
  run["model"].update(model_changes);
  run.update(line_changes);
  const measured_file f = parse_measurements(env + "\n" + run.dump() + "\n", "edited.jsonl");
  REQUIRE(f.runs.size() == 1);
  return f.runs[0];
}

}  // namespace

TEST_CASE("collector reports: a Mistral model's sliding window, MistralConfig's 4096 when not named, Qwen2's from layer 28", "[measured][hf]") {
  CHECK(llama_with_model({{"fam", "llama"}}).model.sliding_window_tokens == 0);
  CHECK(llama_with_model({{"fam", "mistral"}}).model.sliding_window_tokens == 4096);
  CHECK(llama_with_model({{"fam", "mistral"}, {"sliding_window", nullptr}}).model.sliding_window_tokens == 0);
  CHECK(llama_with_model({{"fam", "mistral"}, {"sliding_window", 1024}}).model.sliding_window_tokens == 1024);
  CHECK(llama_with_model({{"fam", "qwen2"}}).model.sliding_window_tokens == 0);
  // Qwen2Config slides only the layers from max_window_layers (28) on: none of the line's (fewer than 28), all but
  // 28 of 32.
  CHECK(llama_with_model({{"fam", "qwen2"}, {"sliding_window", 2048}}).model.sliding_window_tokens == 0);
  CHECK_THROWS_WITH(llama_with_model({{"fam", "qwen2"}, {"L", 32}, {"sliding_window", 2048}}),
                    Catch::Contains("edited.jsonl") && Catch::Contains("layers 28 to 31"));
  CHECK_THROWS_WITH(llama_with_model({{"fam", "llama"}, {"sliding_window", 1024}}),
                    Catch::Contains("edited.jsonl") && Catch::Contains("'sliding_window' is for mistral, qwen2 or phi3"));
  CHECK_THROWS_WITH(llama_with_model({{"fam", "mistral"}, {"sliding_window", 0}}), Catch::Contains("at least 1"));
  CHECK_THROWS_WITH(llama_with_model({{"fam", "mistral"}, {"sliding_window", "wide"}}), Catch::Contains("non-negative integer"));
}

TEST_CASE("collector reports: Phi-3's fused projections and its window on every layer", "[measured][hf]") {
  const measured_run phi3 = llama_with_model({{"fam", "phi3"}, {"sliding_window", nullptr}});
  CHECK(phi3.model.fused_projections);
  CHECK(phi3.model.sliding_window_tokens == 0);
  CHECK_FALSE(llama_with_model({{"fam", "llama"}}).model.fused_projections);
  CHECK(llama_with_model({{"fam", "phi3"}, {"sliding_window", 1024}}).model.sliding_window_tokens == 1024);
  CHECK(llama_with_model({{"fam", "phi3"}}).model.sliding_window_tokens == 0);  // Phi3Config's default: none
  CHECK_THROWS_WITH(llama_with_model({{"fam", "phi4"}}), Catch::Contains("unknown model family 'phi4'") && Catch::Contains("phi3"));
}

TEST_CASE("collector reports: LoRA's rank, targets and adapter dtype", "[measured][hf][lora]") {
  const json lora = {{"lora", 16}, {"lora_targets", "q,v"}};
  const measured_run r = llama_with_model(json::object(), lora);
  CHECK(r.run.finetune == finetune_kind::lora);
  CHECK(r.run.lora_rank == 16);
  CHECK(r.run.lora_targets == (lora_q | lora_v));
  CHECK(r.run.lora_fp32);  // peft's default when the line does not say
  json bf16 = lora;
  bf16["lora_dtype"] = "bfloat16";
  CHECK_FALSE(llama_with_model(json::object(), bf16).run.lora_fp32);
  bf16["lora_dtype"] = "float32";
  CHECK(llama_with_model(json::object(), bf16).run.lora_fp32);
  bf16["lora_dtype"] = "int8";
  CHECK_THROWS_WITH(llama_with_model(json::object(), bf16), Catch::Contains("'lora_dtype' must be float32, bfloat16 or float16"));
  CHECK(r.run.lora_dropout == 0);  // peft's default when the line does not say
  json dropped = lora;
  dropped["lora_dropout"] = 0.05;
  CHECK(llama_with_model(json::object(), dropped).run.lora_dropout == 0.05);
  dropped["lora_dropout"] = 1.0;
  CHECK_THROWS_WITH(llama_with_model(json::object(), dropped), Catch::Contains("lora_dropout must be in [0, 1)"));
  dropped["lora_dropout"] = "0.1";
  CHECK_THROWS_WITH(llama_with_model(json::object(), dropped), Catch::Contains("'lora_dropout' must be a number"));
}

TEST_CASE("collector reports: a step time without memory figures is a time-only run", "[measured][hf]") {
  // A published or quoted step time: neither alloc_peak nor reserved_peak. One without the other is a broken
  // line, named.
  const auto [env, run] = llama_line();
  auto parse_without = [&](std::initializer_list<const char*> keys) {
    json edited = run;
    for (const char* k : keys) edited.erase(k);
    return parse_measurements(env + "\n" + edited.dump() + "\n", "edited.jsonl");
  };
  const measured_file both = parse_without({});
  CHECK(both.runs[0].memory_measured);
  const measured_file time_only = parse_without({"alloc_peak", "reserved_peak"});
  CHECK_FALSE(time_only.runs[0].memory_measured);
  CHECK(time_only.runs[0].step_seconds == both.runs[0].step_seconds);
  CHECK_THROWS_WITH(parse_without({"reserved_peak"}), Catch::Contains("edited.jsonl") && Catch::Contains("reserved_peak"));
  CHECK_THROWS_WITH(parse_without({"alloc_peak"}), Catch::Contains("alloc_peak"));
  CHECK_THROWS_WITH(parse_without({"alloc_peak", "reserved_peak", "step_s"}), Catch::Contains("step_s"));
}

TEST_CASE("collector reports: accumulation and fp16 autocast reach the plan", "[measured][hf][accumulation][fp16]") {
  // collect_hf.py writes "grad_accum" (micro-batches a step, each forward and backward measured within the
  // step's phases) and "regime": "amp-fp16" (autocast to fp16 with torch.amp.GradScaler).
  const measured_run r = llama_with_model(json::object(), {{"grad_accum", 4}, {"regime", "amp-fp16"}});
  CHECK(r.run.grad_accum == 4);
  CHECK(r.run.precision == precision_regime::amp_fp16);
  CHECK(llama_with_model(json::object()).run.grad_accum == 1);  // absent: one micro-batch
}

TEST_CASE("collector reports: expandable segments reach the plan and its replay", "[measured][hf][expandable]") {
  // collect_hf.py writes "expandable_segments": true when PYTORCH_CUDA_ALLOC_CONF asked for them.
  const measured_run plain = llama_with_model(json::object());
  CHECK_FALSE(plain.run.expandable_segments);  // absent: PyTorch's default allocator
  const measured_run expandable = llama_with_model(json::object(), {{"expandable_segments", true}});
  CHECK(expandable.run.expandable_segments);
  CHECK_THROWS_WITH(llama_with_model(json::object(), {{"expandable_segments", "yes"}}),
                    Catch::Contains("field 'expandable_segments' must be true or false"));
}

TEST_CASE("collector reports: the allocator's segments, pool and bytes, and what is refused", "[measured][hf][allocator]") {
  // collect_hf.py writes "segments": [[pool, bytes], ...] from torch.cuda.memory_snapshot().
  CHECK(llama_with_model(json::object()).segments.empty());  // absent: nothing to compare
  const measured_run r =
      llama_with_model(json::object(), {{"segments", json::array({json::array({"large", 20971520}), json::array({"small", 2097152})})}});
  REQUIRE(r.segments.size() == 2);
  CHECK_FALSE(r.segments[0].small_pool);
  CHECK(r.segments[0].bytes == 20971520);
  CHECK(r.segments[1].small_pool);
  CHECK(r.segments[1].bytes == 2097152);
  const std::pair<json, const char*> bad[] = {
      {"large", "field 'segments' must be a list"},
      {json::array({json::array({"large"})}), "each of 'segments' must be"},
      {json::array({json::array({20971520, "large"})}), "each of 'segments' must be"},
      {json::array({json::array({"huge", 20971520})}), "pool must be \"small\" or \"large\", not 'huge'"},
      {json::array({json::array({"large", -1})}), "must be a non-negative integer"},
      {json::array({json::array({"large", 0})}), "a segment of 0 bytes"},
      {json::array({json::array({"large", 1ull << 51})}), "a segment of 2251799813685248 bytes"},
      {json::array({json::array({"large", 1ull << 50}), json::array({"small", 2097152})}), "the segments sum to more than 2^50 bytes"}};
  for (const auto& [segments, message] : bad) {
    INFO(segments.dump());
    CHECK_THROWS_WITH(llama_with_model(json::object(), {{"segments", segments}}), Catch::Contains(message));
  }
}

TEST_CASE("collector reports: the allocator's counters, each optional, and what is refused", "[measured][hf][allocator]") {
  // collect_hf.py writes "allocator_counts" from torch.cuda.memory_stats(), the keys its torch has.
  CHECK_FALSE(llama_with_model(json::object()).allocator_counts.any());
  const measured_run r = llama_with_model(
      json::object(), {{"allocator_counts", {{"num_device_alloc", 57}, {"num_alloc_retries", 0}, {"some_new_key", 3}}}});
  REQUIRE(r.allocator_counts.any());
  CHECK(r.allocator_counts.device_allocs == std::optional<std::uint64_t>(57));
  CHECK(r.allocator_counts.alloc_retries == std::optional<std::uint64_t>(0));
  CHECK_FALSE(r.allocator_counts.device_frees.has_value());  // a torch without the counter: absent, not 0
  CHECK_FALSE(r.allocator_counts.ooms.has_value());
  // An out-of-memory line keeps them too: its retries before failing.
  const measured_run oom = llama_with_model(json::object(), {{"oom", true}, {"allocator_counts", {{"num_ooms", 1}}}});
  CHECK(oom.allocator_counts.ooms == std::optional<std::uint64_t>(1));
  CHECK_THROWS_WITH(llama_with_model(json::object(), {{"allocator_counts", json::array({1})}}),
                    Catch::Contains("field 'allocator_counts' must be an object"));
  CHECK_THROWS_WITH(llama_with_model(json::object(), {{"allocator_counts", {{"num_device_free", -2}}}}),
                    Catch::Contains("field 'num_device_free' must be a non-negative integer"));
}

TEST_CASE("collector reports: the profiled step's GPU busy time and kernels, and what is refused", "[measured][hf][time]") {
  // collect_hf.py --profile writes "profile": {wall_s, kernels, kernel_s, busy_s, copies, copy_s}, or {error}.
  CHECK_FALSE(llama_with_model(json::object()).gpu_profile.has_value());
  const measured_run r = llama_with_model(
      json::object(), {{"profile", {{"wall_s", 0.11}, {"kernels", 3033}, {"kernel_s", 0.0974}, {"busy_s", 0.0974}}}});
  REQUIRE(r.gpu_profile.has_value());
  CHECK(r.gpu_profile->busy_seconds == 0.0974);
  CHECK(r.gpu_profile->kernels == 3033);
  CHECK_FALSE(llama_with_model(json::object(), {{"profile", {{"error", "RuntimeError: no CUPTI"}}}}).gpu_profile.has_value());
  const std::pair<json, const char*> bad[] = {
      {json::array({1}), "field 'profile' must be an object"},
      {{{"kernels", 10}}, "missing field 'busy_s'"},
      {{{"busy_s", 0.01}}, "missing field 'kernels'"},
      {{{"busy_s", 0.0}, {"kernels", 10}}, "'busy_s' must be a number of seconds"},
      {{{"busy_s", 1e9}, {"kernels", 10}}, "'busy_s' must be a number of seconds"},
      {{{"busy_s", 0.01}, {"kernels", 0}}, "'kernels' must be between 1"},
      {{{"busy_s", 0.01}, {"kernels", -3}}, "must be a non-negative integer"}};
  for (const auto& [profile, message] : bad) {
    INFO(profile.dump());
    CHECK_THROWS_WITH(llama_with_model(json::object(), {{"profile", profile}}), Catch::Contains(message));
  }
}

TEST_CASE("collector reports: the loss implementation and packing reach the plan, and what is refused", "[measured][hf][packing]") {
  // A line from before the fields: transformers' own loss, unpacked.
  const measured_run plain = llama_with_model(json::object());
  CHECK(plain.run.loss == loss_kind::standard);
  CHECK(plain.run.packing_doc_tokens == 0);
  const measured_run packed = llama_with_model(json::object(), {{"loss_impl", "standard"}, {"packing", 1024}});
  CHECK(packed.run.loss == loss_kind::standard);
  CHECK(packed.run.packing_doc_tokens == 1024);
  CHECK(llama_with_model(json::object(), {{"packing", nullptr}}).run.packing_doc_tokens == 0);
  CHECK(llama_with_model(json::object(), {{"loss_impl", "fused-linear"}}).run.loss == loss_kind::fused_linear);
  CHECK(llama_with_model(json::object(), {{"loss_impl", "chunked"}}).run.loss == loss_kind::chunked);
  CHECK_THROWS_WITH(llama_with_model(json::object(), {{"loss_impl", "liger"}}), Catch::Contains("loss_impl") && Catch::Contains("liger"));
  CHECK_THROWS_WITH(llama_with_model(json::object(), {{"packing", 0}}), Catch::Contains("packing"));
  CHECK_THROWS_WITH(llama_with_model(json::object(), {{"packing", "long"}}), Catch::Contains("packing"));
}

TEST_CASE("collector reports: attn names transformers' attn_implementation both ways", "[measured][hf]") {
  // collect_hf.py --attn's names; plan check prints the same.
  CHECK(attn_implementation_name(attention_kind::eager) == "eager");
  CHECK(attn_implementation_name(attention_kind::flash) == "sdpa");
  CHECK(attn_implementation_name(attention_kind::flash_attention_2) == "flash_attention_2");
  for (const char* name : {"eager", "sdpa", "flash_attention_2"}) {
    const measured_run r = llama_with_model(json::object(), {{"attn", name}});
    CHECK(attn_implementation_name(r.run.attention) == name);
  }
}
