// Collector reports read (measured_runs.hpp): every line's fields checked with the file, line and field named,
// the env line's device and stack, and each run turned into a model, a run_config and its measurements.
#include "planner/measure/measured_runs.hpp"

#include "planner/profiles/registry.hpp"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "planner/io/hf_config.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {

namespace {

// transformers' attn_implementation names and the planner's kinds (one table: the reader and `plan check`).
constexpr std::pair<attention_kind, std::string_view> attn_implementations[] = {
    {attention_kind::eager, "eager"}, {attention_kind::flash, "sdpa"}, {attention_kind::flash_attention_2, "flash_attention_2"}};

std::optional<attention_kind> attention_of_attn_implementation(std::string_view name) {
  for (const auto& [kind, text] : attn_implementations)
    if (text == name) return kind;
  return std::nullopt;
}

}  // namespace

std::string_view attn_implementation_name(attention_kind a) {
  for (const auto& [kind, text] : attn_implementations)
    if (kind == a) return text;
  return "sdpa";
}
namespace {

using json = nlohmann::json;

// Checked field access: the file, line and field are in every message.
struct line_reader {
  const json& j;
  std::string where;

  const json& at(const char* key) const {
    if (!j.is_object() || !j.contains(key)) throw input_error(fmt::format("{}: missing field '{}'", where, key));
    return j.at(key);
  }
  std::uint64_t count(const json& v, const char* key) const {
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
      throw input_error(fmt::format("{}: field '{}' must be a non-negative integer", where, key));
    return v.get<std::uint64_t>();
  }
  std::uint64_t count(const char* key) const { return count(at(key), key); }
  std::uint64_t count_in(const json& obj, const char* key, std::uint64_t fallback) const {
    return obj.contains(key) ? count(obj.at(key), key) : fallback;
  }
  std::string text(const json& v, const char* key) const {
    if (!v.is_string()) throw input_error(fmt::format("{}: field '{}' must be a string", where, key));
    return v.get<std::string>();
  }
  std::string text(const char* key) const { return text(at(key), key); }
  double number(const char* key) const {
    const json& v = at(key);
    if (!v.is_number()) throw input_error(fmt::format("{}: field '{}' must be a number", where, key));
    return v.get<double>();
  }
  bool flag(const char* key, bool fallback) const {
    if (!j.contains(key)) return fallback;
    if (!j.at(key).is_boolean()) throw input_error(fmt::format("{}: field '{}' must be true or false", where, key));
    return j.at(key).get<bool>();
  }
};

constexpr double max_step_seconds = 86400;              // a measured step of a day or more is no measurement
constexpr double min_step_seconds = 1e-6;               // nor one shorter than a kernel launch
constexpr std::uint64_t max_gpu_bytes = 1ull << 50;      // as gpus.json's memory_bytes
constexpr std::uint64_t max_kernels_per_step = 1ull << 32;  // a kernel a microsecond for over an hour

// "segments": [["large", bytes], ["small", bytes], ...] (collect_hf.py's segment_sizes).
std::vector<measured_segment> read_segments(const line_reader& r) {
  const json& list = r.at("segments");
  if (!list.is_array()) throw input_error(fmt::format("{}: field 'segments' must be a list of [pool, bytes]", r.where));
  std::vector<measured_segment> out;
  out.reserve(list.size());
  std::uint64_t total = 0;  // at most max_gpu_bytes: what one GPU holds, so that the sum is exact
  for (const json& seg : list) {
    if (!seg.is_array() || seg.size() != 2 || !seg[0].is_string())
      throw input_error(fmt::format("{}: each of 'segments' must be [\"small\" or \"large\", bytes]", r.where));
    const std::string pool = seg[0].get<std::string>();
    if (pool != "small" && pool != "large")
      throw input_error(fmt::format("{}: a segment's pool must be \"small\" or \"large\", not '{}'", r.where, pool));
    const std::uint64_t bytes = r.count(seg[1], "segments");
    if (bytes == 0 || bytes > max_gpu_bytes)
      throw input_error(fmt::format("{}: a segment of {} bytes is no segment a GPU holds", r.where, bytes));
    total += bytes;  // both at most 2^50: no overflow
    if (total > max_gpu_bytes)
      throw input_error(fmt::format("{}: the segments sum to more than 2^50 bytes, more than any GPU holds", r.where));
    out.push_back({pool == "small", bytes});
  }
  return out;
}

// "allocator_counts": {"num_device_alloc": n, ...} (collect_hf.py's allocator_counts); unknown keys are skipped.
measured_allocator_counts read_allocator_counts(const line_reader& r) {
  const json& counts = r.at("allocator_counts");
  if (!counts.is_object())
    throw input_error(fmt::format("{}: field 'allocator_counts' must be an object of counts", r.where));
  measured_allocator_counts out;
  const std::pair<const char*, std::optional<std::uint64_t>*> keys[] = {{"num_device_alloc", &out.device_allocs},
                                                                       {"num_device_free", &out.device_frees},
                                                                       {"num_alloc_retries", &out.alloc_retries},
                                                                       {"num_ooms", &out.ooms}};
  for (const auto& [key, value] : keys)
    if (counts.contains(key)) *value = r.count(counts.at(key), key);
  return out;
}

// "profile": {"busy_s": s, "kernels": n, ...} (collect_hf.py's profile_step); {"error": ...} when profiling failed.
std::optional<measured_gpu_profile> read_gpu_profile(const line_reader& r) {
  const json& p = r.at("profile");
  if (!p.is_object()) throw input_error(fmt::format("{}: field 'profile' must be an object", r.where));
  if (p.contains("error")) return std::nullopt;
  const line_reader pr{p, r.where + " profile"};
  measured_gpu_profile out;
  out.busy_seconds = pr.number("busy_s");
  out.kernels = pr.count("kernels");
  if (!(std::isfinite(out.busy_seconds) && out.busy_seconds >= min_step_seconds && out.busy_seconds < max_step_seconds))
    throw input_error(fmt::format("{}: profile's 'busy_s' must be a number of seconds from {} to below {} (1 day), not {}",
                                  r.where, min_step_seconds, max_step_seconds, out.busy_seconds));
  if (out.kernels == 0 || out.kernels > max_kernels_per_step)
    throw input_error(fmt::format("{}: profile's 'kernels' must be between 1 and {}, not {}", r.where,
                                  max_kernels_per_step, out.kernels));
  return out;
}

// "parallel": {"mode", "world_size", "rank", "process_group"[, "nodes", "gpus_per_node"], ...} (collect_hf.py
// --parallel; its other keys describe the wrapping and are not read), and the layout the planner evaluates.
void read_layout(const line_reader& r, measured_run& run) {
  const json& p = r.at("parallel");
  if (!p.is_object()) throw input_error(fmt::format("{}: field 'parallel' must be an object", r.where));
  const line_reader pr{p, r.where + " parallel"};
  measured_layout l;
  l.mode = pr.text("mode");
  l.world_size = pr.count("world_size");
  l.rank = pr.count_in(p, "rank", 0);
  const std::string group = pr.text("process_group");
  if (group != "fake" && group != "nccl")
    throw input_error(fmt::format("{}: parallel's 'process_group' must be fake or nccl, not '{}'", r.where, group));
  l.fake_process_group = group == "fake";
  l.nodes = pr.count_in(p, "nodes", 0);
  l.gpus_per_node = pr.count_in(p, "gpus_per_node", 0);
  if (l.world_size < 2 || l.world_size > (1u << 20))
    throw input_error(fmt::format("{}: parallel's 'world_size' must be from 2 to 2^20, not {}", r.where, l.world_size));
  if (l.rank >= l.world_size)
    throw input_error(fmt::format("{}: parallel's 'rank' ({}) must be below world_size ({})", r.where, l.rank, l.world_size));
  if (l.nodes > 0 && (l.nodes > l.world_size || l.world_size % l.nodes != 0))
    throw input_error(fmt::format("{}: parallel's {} ranks do not spread evenly over {} nodes", r.where, l.world_size, l.nodes));
  run_config& c = run.run;
  c.gpus = l.world_size;
  if (l.mode == "fully_shard") c.zero = 3;  // reshard_after_forward=True, the collector's
  else if (l.mode == "ddp") c.zero = 0;
  else if (l.mode == "zero1") c.zero = 1;
  else if (l.mode == "tp") c.tp = l.world_size;
  else throw input_error(fmt::format("{}: unknown parallel mode '{}' (known: fully_shard, ddp, zero1, tp)", r.where, l.mode));
  run.layout = l;
}

// "collectives": [{"kind", "bytes", "ranks", "nodes", "calls", "seconds", ...}] (collect_parallel.nccl_collectives).
void read_collectives(const line_reader& r, measured_run& run) {
  const json& list = r.at("collectives");
  if (!list.is_array()) throw input_error(fmt::format("{}: field 'collectives' must be a list", r.where));
  for (std::size_t i = 0; i < list.size(); ++i) {
    const line_reader cr{list[i], fmt::format("{} collectives[{}]", r.where, i)};
    const std::string kind = cr.text("kind");
    const bool timed = kind == "all_reduce" || kind == "all_gather" || kind == "reduce_scatter" || kind == "all_to_all" ||
                       kind == "send_recv";
    if (!timed || cr.at("bytes").is_null()) {  // a collective the planner does not time, or one without its sizes
      ++run.collectives_left_out;
      continue;
    }
    measured_collective m;
    m.coll = parse_collective(kind, cr.where);
    m.message_bytes = static_cast<double>(cr.count("bytes"));
    m.ranks = cr.count("ranks");
    m.nodes = cr.count("nodes");
    m.calls = cr.count("calls");
    m.seconds = cr.number("seconds");
    if (m.ranks < 2 || m.nodes == 0 || m.nodes > m.ranks || m.ranks % m.nodes != 0)
      throw input_error(fmt::format("{}: {} ranks on {} nodes is no communicator", cr.where, m.ranks, m.nodes));
    if (m.calls == 0 || !(std::isfinite(m.seconds) && m.seconds > 0 && m.seconds < max_step_seconds))
      throw input_error(fmt::format("{}: 'calls' must be at least 1 and 'seconds' a time above 0 and below a day", cr.where));
    if (m.message_bytes == 0 || m.message_bytes > static_cast<double>(max_gpu_bytes))
      throw input_error(fmt::format("{}: 'bytes' must be between 1 and 2^50", cr.where));
    run.collectives.push_back(m);
  }
}

// A measurement no real run gives is a broken report, not a prediction error: the errors in percent divide
// by these (a step of 0 s printed +inf%), and calibrate fits its constants to them.
void check_measured_step(const line_reader& r, const measured_run& run) {
  if (!(std::isfinite(run.step_seconds) && run.step_seconds >= min_step_seconds && run.step_seconds < max_step_seconds))
    throw input_error(fmt::format("{}: field 'step_s' must be a number of seconds from {} (a microsecond) to below {} "
                                  "(1 day), not {}", r.where, min_step_seconds, max_step_seconds, run.step_seconds));
  if (!run.memory_measured) return;
  if (run.alloc_peak_bytes == 0)
    throw input_error(fmt::format("{}: field 'alloc_peak' must be at least 1: a training step allocates", r.where));
  // At most what one GPU holds, so that the context plus the reserved bytes stays exact (a sum near 2^64
  // wrapped to a small device peak).
  if (run.reserved_peak_bytes > max_gpu_bytes)
    throw input_error(fmt::format("{}: field 'reserved_peak' ({}) is beyond 2^50 bytes, more than any GPU holds", r.where,
                                  run.reserved_peak_bytes));
  if (run.reserved_peak_bytes < run.alloc_peak_bytes)
    throw input_error(fmt::format("{}: field 'reserved_peak' ({}) must be at least alloc_peak ({}): the caching "
                                  "allocator reserves every byte it hands out", r.where, run.reserved_peak_bytes,
                                  run.alloc_peak_bytes));
}

// The env line's device: cudaMemGetInfo's total, and the context that PyTorch's reserved bytes leave of it.
void check_env(const line_reader& r, const measured_file& f) {
  if (f.gpu_total_bytes == 0 || f.gpu_total_bytes > max_gpu_bytes)
    throw input_error(fmt::format("{}: field 'gpu_total_bytes' must be between 1 and 2^50 (1 PiB), not {}", r.where,
                                  f.gpu_total_bytes));
  if (f.context_bytes == 0 || f.context_bytes >= f.gpu_total_bytes)
    throw input_error(fmt::format("{}: field 'context_bytes' ({}) must be above 0 and below gpu_total_bytes ({})",
                                  r.where, f.context_bytes, f.gpu_total_bytes));
}

measured_run read_run(const line_reader& r) {
  measured_run run;
  run.id = r.text("id");
  const json& m = r.at("model");
  if (!m.is_object()) throw input_error(fmt::format("{}: field 'model' must be an object", r.where));
  const line_reader mr{m, r.where + " model"};
  const std::string fam = mr.text("fam");
  if (fam != "gpt2" && fam != "llama" && fam != "mistral" && fam != "qwen2" && fam != "phi3")
    throw input_error(fmt::format("{}: unknown model family '{}' (known: gpt2, llama, mistral, qwen2, phi3)", r.where, fam));
  const bool gpt = fam == "gpt2";
  model_spec& s = run.model;
  s.name = run.id;
  s.family = gpt ? model_family::gpt : model_family::llama;
  s.layers = mr.count("L");
  s.hidden = mr.count("h");
  s.heads = mr.count("a");
  if (s.heads == 0 || s.hidden % s.heads != 0) throw input_error(fmt::format("{}: heads must divide h", r.where));
  s.kv_heads = mr.count_in(m, "kv", s.heads);
  s.head_dim = s.hidden / s.heads;
  s.ffn = mr.count_in(m, "ffn", 4 * s.hidden);
  s.vocab = mr.count("V");
  const bool tied = mr.flag("tied", false);  // read (and type-checked) for GPT-2 too, which always ties
  s.tied_embeddings = gpt || tied;
  s.qkv_bias = fam == "qwen2";
  s.fused_projections = fam == "phi3";  // Phi3Config: one qkv_proj, one gate_up_proj (planner/io/hf_config.cpp read_phi3)
  s.max_positions = gpt ? mr.count_in(m, "max_positions", 1024) : 0;  // Llama's rotary positions are no parameters
  // A sliding window: "sliding_window" (null: none). A Mistral line without the field has MistralConfig's
  // default, 4096, on every layer. Qwen2 has none unless it names one (use_sliding_window defaults to false),
  // and then only on the layers from Qwen2Config's default max_window_layers (28) on, which the collector
  // leaves as it is: no layer of a model of 28 layers or fewer slides.
  if (m.contains("sliding_window") && !m.at("sliding_window").is_null()) {
    if (gpt || fam == "llama")
      throw input_error(fmt::format("{}: field 'sliding_window' is for mistral, qwen2 or phi3 models", r.where));
    s.sliding_window_tokens = mr.count(m.at("sliding_window"), "sliding_window");
    if (s.sliding_window_tokens == 0) throw input_error(fmt::format("{}: field 'sliding_window' must be at least 1 (null: none)", r.where));
    if (fam == "qwen2")
      s.sliding_window_tokens = qwen2_window_tokens(s.layers, s.sliding_window_tokens, qwen2_default_max_window_layers, r.where);
  } else if (!m.contains("sliding_window") && fam == "mistral") {
    s.sliding_window_tokens = 4096;
  }
  validate_model(s);

  run_config& c = run.run;
  c.seq = r.count("seq");
  c.micro_batch = r.count("mbs");
  c.grad_accum = r.count_in(r.j, "grad_accum", 1);
  const std::string regime = r.text("regime");
  if (regime == "amp-bf16") c.precision = precision_regime::amp_bf16;
  else if (regime == "amp-fp16") c.precision = precision_regime::amp_fp16;
  else if (regime == "bf16") c.precision = precision_regime::bf16;
  else if (regime == "fp32") c.precision = precision_regime::fp32;
  else if (regime == "bf16-mixed") c.precision = precision_regime::bf16_mixed;  // fully_shard's MixedPrecisionPolicy
  else throw input_error(fmt::format("{}: unknown regime '{}' (known: amp-bf16, amp-fp16, bf16, fp32, bf16-mixed)", r.where, regime));
  const std::string attn = r.text("attn");
  // transformers' attn_implementation names (collect_hf.py --attn).
  const std::optional<attention_kind> kind = attention_of_attn_implementation(attn);
  if (!kind) throw input_error(fmt::format("{}: unknown attn '{}' (known: sdpa, eager, flash_attention_2)", r.where, attn));
  c.attention = *kind;
  // The loss implementation the collector ran ("loss_impl"; absent: transformers' own ForCausalLMLoss, the
  // only one older collectors ran), in `plan --loss`'s names.
  if (r.j.contains("loss_impl")) {
    const std::string loss = r.text("loss_impl");
    if (loss == "standard") c.loss = loss_kind::standard;
    else if (loss == "chunked") c.loss = loss_kind::chunked;
    else if (loss == "fused-linear") c.loss = loss_kind::fused_linear;
    else throw input_error(fmt::format("{}: unknown loss_impl '{}' (known: standard, chunked, fused-linear)", r.where, loss));
  }
  // Packed documents (collect_hf.py --packing): their length in tokens; absent or null: unpacked.
  if (r.j.contains("packing") && !r.j.at("packing").is_null()) {
    c.packing_doc_tokens = r.count("packing");
    if (c.packing_doc_tokens == 0) throw input_error(fmt::format("{}: field 'packing' must be at least 1 (null: unpacked)", r.where));
  }
  c.recompute = r.flag("gc", false) ? recompute_mode::full : recompute_mode::none;
  run.compiled = r.flag("compile", false);
  // plan --compile model: the collector's model.compile() compiles the whole model, the loss that
  // LlamaForCausalLM.forward computes included.
  c.compile = run.compiled ? compile_scope::model : compile_scope::none;
  c.dropout = r.number("drop");
  if (!(c.dropout >= 0 && c.dropout < 1)) throw input_error(fmt::format("{}: drop must be in [0, 1)", r.where));
  const std::string opt = r.j.contains("opt") ? r.text("opt") : "foreach";
  if (opt != "foreach" && opt != "fused") throw input_error(fmt::format("{}: unknown opt '{}' (known: foreach, fused)", r.where, opt));
  c.optimizer_impl = opt == "fused" ? optimizer_impl_kind::fused : optimizer_impl_kind::foreach_impl;
  // PYTORCH_CUDA_ALLOC_CONF had expandable_segments:True (collect_hf.py); absent: PyTorch's default allocator.
  c.expandable_segments = r.flag("expandable_segments", false);
  if (r.j.contains("lora") && !r.j.at("lora").is_null()) {
    c.finetune = finetune_kind::lora;
    c.lora_rank = r.count("lora");
    if (r.j.contains("lora_targets")) c.lora_targets = parse_lora_targets(r.text("lora_targets"));
    // The adapters' dtype as torch names it (collect_hf.py); absent: peft's fp32.
    if (r.j.contains("lora_dtype")) {
      const std::string t = r.text("lora_dtype");
      if (t != "float32" && t != "bfloat16" && t != "float16")
        throw input_error(fmt::format("{}: field 'lora_dtype' must be float32, bfloat16 or float16, not '{}'", r.where, t));
      c.lora_fp32 = t == "float32";
    }
    // peft's LoraConfig.lora_dropout; absent: peft's default, 0.
    if (r.j.contains("lora_dropout")) {
      c.lora_dropout = r.number("lora_dropout");
      if (!(c.lora_dropout >= 0 && c.lora_dropout < 1))
        throw input_error(fmt::format("{}: lora_dropout must be in [0, 1)", r.where));
    }
  }
  run.params = r.count("params");
  if (r.j.contains("stack")) run.stack = &profile_named(r.text("stack"), r.where + ": stack");
  if (r.j.contains("parallel")) read_layout(r, run);
  run.time_comparable = r.flag("time_comparable", true);
  if (r.j.contains("collectives")) read_collectives(r, run);
  run.out_of_memory = r.flag("oom", false);
  if (r.j.contains("allocator_counts")) run.allocator_counts = read_allocator_counts(r);
  if (!run.out_of_memory) {  // an out-of-memory run has no completed step to measure
    run.memory_measured = r.j.contains("alloc_peak") || r.j.contains("reserved_peak");
    if (run.memory_measured) {  // both, or the missing one is named
      run.alloc_peak_bytes = r.count("alloc_peak");
      run.reserved_peak_bytes = r.count("reserved_peak");
    }
    run.step_seconds = r.number("step_s");
    check_measured_step(r, run);
    if (r.j.contains("segments")) run.segments = read_segments(r);
    if (r.j.contains("profile")) run.gpu_profile = read_gpu_profile(r);
  }
  return run;
}

}  // namespace

void mark_one_process(measured_file& f) {
  for (std::size_t i = 1; i < f.runs.size(); ++i) f.runs[i].run.cublas_workspaces_held = true;
}

measured_file parse_measurements(std::string_view text, const std::string& file_name) {
  measured_file out;
  std::istringstream in{std::string(text)};
  int number = 0;
  bool have_env = false;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{} line {}", file_name, number);
    json j;
    try {
      j = json::parse(line);
    } catch (const json::exception& e) {  // syntax, and numbers out of range such as 1e400
      throw input_error(fmt::format("{}: not JSON ({})", where, e.what()));
    }
    const line_reader r{j, where};
    if (r.text("id") == "env") {
      out.gpu = r.text("gpu");
      out.torch = r.text("torch");
      out.transformers = r.text("transformers");
      out.context_bytes = r.count("context_bytes");
      if (r.j.contains("host_cpu")) {
        out.host_cpu = r.text("host_cpu");
        for (char& c : out.host_cpu)  // printed on one line
          if (static_cast<unsigned char>(c) < 0x20) c = ' ';
        if (r.j.contains("host_cpus")) out.host_cpu += fmt::format(", {} logical CPUs", r.count("host_cpus"));
      }
      out.gpu_total_bytes = r.count("gpu_total_bytes");
      // The training stack the collector measured (a profile's name); reports from before the field: the
      // collector's own stack.
      if (r.j.contains("stack")) out.stack = &profile_named(r.text("stack"), where + ": stack");
      check_env(r, out);
      have_env = true;
      continue;
    }
    out.runs.push_back(read_run(r));
  }
  if (!have_env) throw input_error(fmt::format("{}: no env line (\"id\": \"env\") describing the machine", file_name));
  if (!out.stack) out.stack = &unlabelled_report_profile();
  for (measured_run& run : out.runs) run.run.profile = run.stack ? run.stack : out.stack;
  if (out.runs.empty()) throw input_error(fmt::format("{}: no measured configuration", file_name));
  return out;
}

}  // namespace trainplan
