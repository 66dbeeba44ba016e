// The data catalog (catalog.hpp): data/gpus.json, models.json and calibration.json read strictly (each key read
// or refused, names that would shadow each other refused), a --data-dir's entries merged over the built-in ones,
// and the lookups by name, alias or Hugging Face repository.
#include "planner/io/catalog.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "planner/io/embedded_data.hpp"
#include "planner/io/strict_json.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/util/input_error.hpp"
#include "planner/util/names.hpp"
#include "planner/util/text_file.hpp"
#include "planner/util/quantity_parse.hpp"

namespace trainplan {
namespace {

using json = nlohmann::json;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return out;
}

// A name users type after --gpu or --model and that every table and message shows: not empty, no spaces or
// control characters (a newline would break every line that names it), no comma (sweeps split lists at commas).
// `where` names the file and the entry ("gpus.json: gpus[3]"), `key` the field.
std::string checked_entry_name(const std::string& name, const std::string& where, const std::string& key) {
  if (name.empty()) throw input_error(fmt::format("{}: {} is empty", where, key));
  for (const char c : name) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F || c == ' ')
      throw input_error(fmt::format("{}: {} '{}' holds {}", where, key, name,
                                    c == ' ' ? "a space" : c == '\n' ? "a newline" : "a control character"));
    if (c == ',') throw input_error(fmt::format("{}: {} '{}' holds a comma, which sweeps split lists at", where, key, name));
  }
  return name;
}

// Every name and alias finds one GPU: gpu() returns the first match, so a GPU under a name another one
// already has would never be found, and --gpu would silently pick the other.
void check_gpu_names(const std::vector<gpu_spec>& gpus, const std::string& file) {
  std::map<std::string, std::size_t> owner;  // name or alias -> index of the GPU it names
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    auto claim = [&](const std::string& key) {
      const auto [it, fresh] = owner.emplace(key, i);
      if (!fresh && it->second != i)
        throw input_error(fmt::format("{}: '{}' names two GPUs ({} and {})", file, key, gpus[it->second].name, gpus[i].name));
    };
    claim(gpus[i].name);
    for (const std::string& alias : gpus[i].aliases) claim(alias);
  }
}

// Likewise every name and Hugging Face repository finds one model preset.
void check_model_names(const std::vector<model_preset>& models, const std::string& file) {
  std::map<std::string, std::size_t> owner;  // name or repository -> index of the preset it names
  for (std::size_t i = 0; i < models.size(); ++i)
    for (const std::string& key : {models[i].spec.name, lower(models[i].hf_repo)}) {
      if (key.empty()) continue;
      const auto [it, fresh] = owner.emplace(key, i);
      if (!fresh && it->second != i)
        throw input_error(fmt::format("{}: '{}' names two models ({} and {})", file, key, models[it->second].spec.name,
                                      models[i].spec.name));
    }
}

// "measured", "reported" or "estimate" (gpu_spec.hpp, memory_source).
memory_source parse_memory_source(const std::string& text, const std::string& where) {
  if (text == "measured") return memory_source::measured;
  if (text == "reported") return memory_source::reported;
  if (text == "estimate") return memory_source::estimate;
  throw input_error(fmt::format("{}: key 'memory_source' must be measured, reported or estimate, not '{}'", where, text));
}

// "major.minor" as CUDA prints it ("9.0", "10.0", "8.9"): each part a number of at most two digits, the major one
// at least 1.
compute_capability parse_compute_capability(const std::string& text, const std::string& where) {
  const std::size_t dot = text.find('.');
  auto digits = [](std::string_view part) {
    return !part.empty() && part.size() <= 2 && std::all_of(part.begin(), part.end(), [](unsigned char c) { return std::isdigit(c); });
  };
  const std::string_view all(text);
  if (dot == std::string::npos || !digits(all.substr(0, dot)) || !digits(all.substr(dot + 1)) ||
      std::stoul(text.substr(0, dot)) == 0)
    throw input_error(fmt::format("{}: key 'compute_capability' must be major.minor as CUDA gives it (\"9.0\", "
                                  "\"8.6\"), not '{}'", where, text));
  return {static_cast<unsigned>(std::stoul(text.substr(0, dot))), static_cast<unsigned>(std::stoul(text.substr(dot + 1)))};
}

std::vector<gpu_spec> parse_gpus(std::string_view text) {
  const std::string file = "gpus.json";
  json doc = parse_document(text, file);
  strict_object top(doc, file);
  const json& list = top.at("gpus");
  top.finish();
  if (!list.is_array()) throw input_error(file + ": key 'gpus' must be an array");
  std::vector<gpu_spec> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    strict_object o(list[i], fmt::format("{}: gpus[{}]", file, i));
    gpu_spec g;
    g.name = lower(checked_entry_name(o.string("name"), o.where(), "name"));
    const json& aliases = o.at("aliases");
    if (!aliases.is_array()) throw input_error(o.where() + ": key 'aliases' must be an array");
    for (const json& a : aliases) {
      if (!a.is_string()) throw input_error(o.where() + ": aliases must be strings");
      g.aliases.push_back(lower(checked_entry_name(a.get<std::string>(), o.where(), "alias")));
    }
    g.description = o.string("description");
    if (o.has("device_names")) {  // optional: a user's gpus.json may leave it out
      const json& names = o.at("device_names");
      if (!names.is_array()) throw input_error(o.where() + ": key 'device_names' must be an array");
      for (const json& n : names) {
        if (!n.is_string() || n.get<std::string>().empty() || n.get<std::string>().find('\n') != std::string::npos)
          throw input_error(o.where() + ": device_names must be non-empty one-line strings");
        g.device_names.push_back(n.get<std::string>());
      }
    }
    g.memory_bytes = o.uint("memory_bytes");
    // Optional, so that a user's gpus.json may leave them out: where memory_bytes comes from, and the compute
    // capability (NVIDIA's CUDA GPUs page, https://developer.nvidia.com/cuda-gpus).
    if (o.has("memory_source")) g.memory_from = parse_memory_source(o.string("memory_source"), o.where());
    if (o.has("compute_capability")) g.capability = parse_compute_capability(o.string("compute_capability"), o.where());
    g.memory_bandwidth_bytes_per_s = o.number("memory_bandwidth_bytes_per_s");
    g.host_link_bytes_per_s = o.number("host_link_bytes_per_s");
    strict_object peaks(o.at("peak_dense_tflops"), o.where() + ": peak_dense_tflops");
    for (dtype t : {dtype::fp32, dtype::tf32, dtype::bf16, dtype::fp16, dtype::fp8}) {
      const json& v = peaks.at(std::string(dtype_name(t)));
      if (v.is_null()) continue;
      // Sane ranges keep every derived figure finite: a peak of 1e-320 TFLOP/s made step times infinite.
      if (!v.is_number() || !(v.get<double>() >= 1 && v.get<double>() <= 1e5))
        throw input_error(fmt::format("{}: peak_dense_tflops.{} must be between 1 and 100000 TFLOP/s, or null", o.where(),
                                      dtype_name(t)));
      g.peak_dense_tflops[static_cast<std::size_t>(t)] = v.get<double>();
    }
    peaks.finish();
    // Optional, so that a user's gpus.json may leave them out: the usual cluster preset (null or absent: none,
    // checked against clusters.json once both are read) and the SM count.
    if (o.has("node") && !o.at("node").is_null()) g.node = lower(o.string("node"));
    if (o.has("sm_count")) {
      const std::uint64_t sms = o.uint("sm_count");
      if (sms == 0 || sms > 100000) throw input_error(o.where() + ": sm_count must be between 1 and 100000");
      g.sm_count = static_cast<std::uint32_t>(sms);
    }
    if (o.has("matmul_achievable_fraction")) {
      const nlohmann::json& v = o.at("matmul_achievable_fraction");
      if (!v.is_number() || !(v.get<double>() > 0.05 && v.get<double>() <= 1))
        throw input_error(o.where() + ": matmul_achievable_fraction must be a number above 0.05 and at most 1");
      g.matmul_achievable_fraction = v.get<double>();
    }
    g.source = o.string("source");
    o.finish();
    // At most 1 PiB: budgets are computed from it (x (1 - margin)) and must not wrap.
    if (g.memory_bytes == 0 || g.memory_bytes > (1ull << 50))
      throw input_error(o.where() + ": memory_bytes must be between 1 and 2^50 (1 PiB)");
    if (!(g.memory_bandwidth_bytes_per_s >= 1e10 && g.memory_bandwidth_bytes_per_s <= 1e14))
      throw input_error(o.where() + ": memory_bandwidth_bytes_per_s must be between 0.01 and 100 TB/s");
    if (!(g.host_link_bytes_per_s >= 1e8 && g.host_link_bytes_per_s <= 1e14))
      throw input_error(o.where() + ": host_link_bytes_per_s must be between 0.1 GB/s and 100 TB/s");
    out.push_back(std::move(g));
  }
  check_gpu_names(out, file);
  return out;
}

std::vector<model_preset> parse_models(std::string_view text) {
  const std::string file = "models.json";
  json doc = parse_document(text, file);
  strict_object top(doc, file);
  const json& list = top.at("models");
  top.finish();
  if (!list.is_array()) throw input_error(file + ": key 'models' must be an array");
  std::vector<model_preset> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    strict_object o(list[i], fmt::format("{}: models[{}]", file, i));
    model_preset p;
    model_spec& m = p.spec;
    m.name = lower(checked_entry_name(o.string("name"), o.where(), "name"));
    const std::string family = o.string("family");
    if (family != "gpt" && family != "llama")  // parse_family's own message names the --family option
      throw input_error(fmt::format("{}: key 'family' must be gpt or llama, not '{}'", o.where(), family));
    m.family = parse_family(family);
    p.nominal_text = o.string("nominal_params");
    p.nominal_params = parse_decimal_count(p.nominal_text, o.where() + ": nominal_params");
    m.layers = o.uint("layers");
    m.hidden = o.uint("hidden");
    m.heads = o.uint("heads");
    m.kv_heads = o.uint("kv_heads");
    m.head_dim = o.has("head_dim") ? o.uint("head_dim") : (m.heads ? m.hidden / m.heads : 0);
    if (!o.has("head_dim") && m.heads && m.hidden % m.heads != 0)
      throw input_error(fmt::format("{}: heads must divide hidden, or give head_dim", o.where()));
    m.ffn = o.uint("ffn");
    m.vocab = o.uint("vocab");
    m.max_positions = o.uint("max_positions");
    m.tied_embeddings = o.boolean("tied_embeddings");
    m.qkv_bias = o.has("qkv_bias") ? o.boolean("qkv_bias") : false;
    if (o.has("fused_projections")) m.fused_projections = o.boolean("fused_projections");
    m.dropout = o.number("dropout");
    // Optional Gemma 2 / sliding-window keys (model_spec.hpp); absent, each keeps its plain-family default.
    if (o.has("norms_per_layer")) m.norms_per_layer = o.uint("norms_per_layer");
    if (o.has("mlp_gate")) {
      const std::string gate = o.string("mlp_gate");
      if (gate != "silu" && gate != "gelu_tanh")
        throw input_error(fmt::format("{}: key 'mlp_gate' must be silu or gelu_tanh, not '{}'", o.where(), gate));
      m.mlp_gate = parse_gate_activation(gate);
    }
    if (o.has("embed_scale_sqrt_hidden")) m.embed_scale_sqrt_hidden = o.boolean("embed_scale_sqrt_hidden");
    if (o.has("attn_logit_softcap")) m.attn_logit_softcap = o.number("attn_logit_softcap");
    if (o.has("final_logit_softcap")) m.final_logit_softcap = o.number("final_logit_softcap");
    if (o.has("sliding_window_tokens")) m.sliding_window_tokens = o.uint("sliding_window_tokens");
    if (o.has("sliding_window_global_every")) m.sliding_window_global_every = o.uint("sliding_window_global_every");
    // Optional Mixture-of-Experts and Qwen3 keys (model_spec.hpp).
    if (o.has("experts")) m.experts = o.uint("experts");
    if (o.has("experts_per_token")) m.experts_per_token = o.uint("experts_per_token");
    if (o.has("shared_expert_ffn")) m.shared_expert_ffn = o.uint("shared_expert_ffn");
    if (o.has("qk_norm")) m.qk_norm = o.boolean("qk_norm");
    if (o.has("shared_expert_gate")) m.shared_expert_gate = o.boolean("shared_expert_gate");
    // Optional DeepSeek keys: dense first layers, the routing bias, multi-head latent attention.
    if (o.has("dense_layers")) m.dense_layers = o.uint("dense_layers");
    if (o.has("dense_ffn")) m.dense_ffn = o.uint("dense_ffn");
    if (o.has("router_score_bias")) m.router_score_bias = o.boolean("router_score_bias");
    if (o.has("kv_lora_rank")) m.kv_lora_rank = o.uint("kv_lora_rank");
    if (o.has("q_lora_rank")) m.q_lora_rank = o.uint("q_lora_rank");
    if (o.has("rope_head_dim")) m.rope_head_dim = o.uint("rope_head_dim");
    if (o.has("v_head_dim")) m.v_head_dim = o.uint("v_head_dim");
    if (o.has("hf_repo")) {
      p.hf_repo = o.string("hf_repo");
      const std::size_t slash = p.hf_repo.find('/');
      if (slash == 0 || slash == std::string::npos || slash + 1 == p.hf_repo.size() || p.hf_repo.find('/', slash + 1) != std::string::npos ||
          p.hf_repo.find_first_of(" \t\n") != std::string::npos)
        throw input_error(fmt::format("{}: key 'hf_repo' must be a repository id, owner/name, not '{}'", o.where(), p.hf_repo));
    }
    m.source = o.string("source");
    o.finish();
    try {  // its messages name the model ("model x: kv_heads (5) must divide heads (12)"); the file and entry are added
      validate_model(m);
    } catch (const input_error& e) {
      throw input_error(fmt::format("{}: {}", o.where(), e.what()));
    }
    if (std::any_of(out.begin(), out.end(), [&](const model_preset& q) { return q.spec.name == m.name; }))
      throw input_error(fmt::format("{}: model '{}' is listed twice", o.where(), m.name));
    out.push_back(std::move(p));
  }
  return out;
}

// A stack's "timing": the step-time model's constants (planner/system/timing_constants.hpp); an entry over a base
// overrides only the keys it names. Ranges (timing_limits) keep the roofline finite and meaningful.
void parse_timing(const json& j, const std::string& at, timing_constants& t, bool partial) {
  strict_object o(j, at);
  auto pick = [&](const char* key, double& field, double lo, double hi) {
    if (partial && !o.has(key)) return;
    field = o.number(key);
    if (!(field >= lo && field <= hi)) throw input_error(fmt::format("{}: {} must be within [{}, {}]", at, key, lo, hi));
  };
  using lim = timing_limits;
  pick("gemm_efficiency", t.gemm_efficiency, lim::min_efficiency, 1);
  pick("gemm_half_dim", t.gemm_half_dim, 0, lim::max_gemm_half_dim);
  pick("fp32_gemm_efficiency", t.fp32_gemm_efficiency, lim::min_efficiency, 1);
  pick("attention_efficiency", t.attention_efficiency, lim::min_efficiency, 1);
  pick("bandwidth_fraction", t.bandwidth_fraction, lim::min_efficiency, 1);
  pick("kernel_seconds", t.kernel_seconds, 0, lim::max_kernel_seconds);
  pick("step_seconds", t.step_seconds, 0, lim::max_step_seconds);
  pick("foreach_tensor_seconds", t.foreach_tensor_seconds, 0, lim::max_foreach_tensor_seconds);
  // The host's cost per launch (absent: 0, a host that never holds the GPU back).
  if (o.has("forward_kernel_seconds") || partial)
    pick("forward_kernel_seconds", t.forward_kernel_seconds, 0, lim::max_host_kernel_seconds);
  if (o.has("backward_kernel_seconds") || partial)
    pick("backward_kernel_seconds", t.backward_kernel_seconds, 0, lim::max_host_kernel_seconds);
  o.finish();
}

constexpr std::uint64_t max_overhead_bytes = 1ull << 50;  // 1 PiB: no context or workspace is larger

// "profiles": {"<profile>": {...}, ...}: each stack's own constants, under its profile's name (planner/profiles/
// registry.hpp). A stack's entry holds "timing" and the keys its profile reads (calibration_keys); a stack that
// shares another's runtime has none (stack_profile::calibrated_as). The default
// entry (partial false) holds every registered stack's complete timing; a GPU's entry overrides what it names.
void parse_stacks(const json& j, const std::string& where, calibration& c, bool partial) {
  strict_object stacks(j, where);
  for (auto it = j.begin(); it != j.end(); ++it)  // an unknown stack first: its name says more than a missing one
    if (!it.key().starts_with("_")) profile_named(it.key(), where);
  for (const stack_profile* p : all_profiles()) {
    const std::string name(p->name);
    if (p->calibrated_as) {  // it reads another stack's entry (stack_profile::calibrated_as)
      if (stacks.has(name))
        throw input_error(fmt::format("{}: the {} profile has no entry of its own: it reads {}'s", where, name,
                                      calibration_name(*p)));
      continue;
    }
    if (!stacks.has(name)) {
      if (!partial) throw input_error(fmt::format("{}: missing key '{}'", where, name));
      continue;
    }
    const std::string at = where + "." + name;
    strict_object o(stacks.at(name), at);
    stack_calibration& sc = c.stack(name);
    auto reads = [&](std::string_view key) {
      return std::find(p->calibration_keys.begin(), p->calibration_keys.end(), key) != p->calibration_keys.end();
    };
    if (o.has("cuda_context_bytes")) {
      if (!reads("cuda_context_bytes"))
        throw input_error(fmt::format("{}: the {} profile reads no cuda_context_bytes of its own", at, name));
      sc.cuda_context_bytes = o.uint("cuda_context_bytes");
      if (*sc.cuda_context_bytes > max_overhead_bytes)
        throw input_error(at + ": cuda_context_bytes must be at most 2^50 (1 PiB)");
      sc.context_origin = partial ? calibration_origin::measured : calibration_origin::fallback;
    }
    if (o.has("allocator_slack_fraction")) {
      if (!reads("allocator_slack_fraction"))
        throw input_error(fmt::format("{}: the {} profile reads no allocator_slack_fraction of its own", at, name));
      sc.allocator_slack_fraction = o.number("allocator_slack_fraction");
      if (*sc.allocator_slack_fraction < 0 || *sc.allocator_slack_fraction > 1)
        throw input_error(at + ": allocator_slack_fraction must be within [0, 1]");
    }
    if (!partial || o.has("timing")) {
      parse_timing(o.at("timing"), at + ".timing", sc.timing, partial);
      sc.timing_origin = partial ? calibration_origin::measured : calibration_origin::fallback;
    }
    o.finish();
  }
  stacks.finish();
}

calibration parse_calibration_entry(const json& j, const std::string& where, const calibration* base) {
  strict_object o(j, where);
  calibration c = base ? *base : calibration{};
  auto pick_uint = [&](const char* key, std::uint64_t& field) {
    if (base && !o.has(key)) return;
    field = o.uint(key);
  };
  auto pick_number = [&](const char* key, double& field) {
    if (base && !o.has(key)) return;
    field = o.number(key);
  };
  pick_uint("cuda_context_bytes", c.cuda_context_bytes);
  pick_uint("cublas_workspace_bytes", c.cublas_workspace_bytes);
  pick_number("allocator_slack_fraction", c.allocator_slack_fraction);
  pick_number("safety_margin_fraction", c.safety_margin_fraction);
  if (!base || o.has("profiles")) parse_stacks(o.at("profiles"), where + ".profiles", c, base != nullptr);
  if (!base || o.has("source")) c.source = o.string("source");
  o.finish();
  if (c.cuda_context_bytes > max_overhead_bytes || c.cublas_workspace_bytes > max_overhead_bytes)
    throw input_error(where + ": context and workspace bytes must be at most 2^50 (1 PiB)");
  if (c.allocator_slack_fraction < 0 || c.allocator_slack_fraction > 1)
    throw input_error(where + ": allocator_slack_fraction must be within [0, 1]");
  if (c.safety_margin_fraction < 0 || c.safety_margin_fraction >= 1)
    throw input_error(where + ": safety_margin_fraction must be within [0, 1)");
  return c;
}

std::string read_file(const std::filesystem::path& path) { return read_text_file(path); }

template <typename T, typename Name>
void merge_by_name(std::vector<T>& into, std::vector<T> from, Name name_of) {
  for (T& item : from) {
    auto it = std::find_if(into.begin(), into.end(), [&](const T& x) { return name_of(x) == name_of(item); });
    if (it != into.end()) *it = std::move(item);
    else into.push_back(std::move(item));
  }
}

}  // namespace

void catalog::apply_calibration(std::string_view calibration_json, bool replace_default) {
  const std::string file = "calibration.json";
  json doc = parse_document(calibration_json, file);
  strict_object top(doc, file);
  if (replace_default || top.has("default"))
    default_calibration_ = parse_calibration_entry(top.at("default"), file + ": default", nullptr);
  // Both branches are references: a copy of the document (as `: json::object()` made) recurses once per
  // nesting level, and a deeply nested "gpus" overflowed the stack before it was refused.
  static const json no_gpus = json::object();
  const json& per_gpu = top.has("gpus") || replace_default ? top.at("gpus") : no_gpus;
  // Optional: the GPU whose own entry fills in what another GPU's lacks (calibration_for).
  if (top.has("reference_gpu")) {
    const std::string name = lower(top.string("reference_gpu"));
    if (std::none_of(gpus_.begin(), gpus_.end(), [&](const gpu_spec& g) { return g.name == name; }))
      throw input_error(fmt::format("{}: reference_gpu '{}' is not a GPU in gpus.json", file, name));
    reference_gpu_ = name;
  }
  top.finish();
  if (!per_gpu.is_object()) throw input_error(file + ": key 'gpus' must be an object");
  for (auto it = per_gpu.begin(); it != per_gpu.end(); ++it) {
    const std::string name = lower(it.key());
    if (std::none_of(gpus_.begin(), gpus_.end(), [&](const gpu_spec& g) { return g.name == name; }))
      throw input_error(fmt::format("{}: gpus.{} is not a GPU in gpus.json", file, it.key()));
    std::erase_if(gpu_calibration_, [&](const auto& entry) { return entry.first == name; });
    gpu_calibration_.emplace_back(
        name, parse_calibration_entry(it.value(), fmt::format("{}: gpus.{}", file, it.key()), &default_calibration_));
  }
}

catalog catalog::from_text(std::string_view gpus_json, std::string_view models_json, std::string_view calibration_json,
                           std::string_view clusters_json) {
  catalog c;
  c.gpus_ = parse_gpus(gpus_json);
  c.models_ = parse_models(models_json);
  check_model_names(c.models_, "models.json");
  c.apply_calibration(calibration_json, true);
  if (!clusters_json.empty()) c.clusters_ = parse_cluster_tables(clusters_json);
  resolve_cluster_tables(c.clusters_, c.gpus_);
  c.attach_usual_clusters();
  return c;
}

void catalog::apply_clusters(std::string_view clusters_json) {
  merge_cluster_tables(clusters_, parse_cluster_tables(clusters_json));
  resolve_cluster_tables(clusters_, gpus_);
  attach_usual_clusters();
}

void catalog::attach_usual_clusters() {
  for (gpu_spec& g : gpus_) {
    const cluster_spec* usual = usual_cluster(g);
    g.cluster = usual ? std::make_shared<const cluster_spec>(*usual) : nullptr;
  }
}

catalog catalog::load(const std::optional<std::filesystem::path>& data_dir) {
  auto embedded = [](std::string_view name) -> std::string_view {
    for (const embedded_file& f : embedded_data_files())
      if (f.name == name) return f.bytes;
    throw input_error(fmt::format("{}: not embedded in this build", name));
  };
  catalog c = from_text(embedded("gpus.json"), embedded("models.json"), embedded("calibration.json"), embedded("clusters.json"));
  if (!data_dir) return c;
  if (!std::filesystem::is_directory(*data_dir))
    throw input_error(fmt::format("--data-dir: {} is not a folder", data_dir->string()));
  // A user's files add entries and replace built-in entries of the same name. Reading errors name the
  // file's full path already; they are raised here, outside the prefixing below.
  auto user_file = [&](const char* name) -> std::optional<std::string> {
    std::filesystem::path p = *data_dir / name;
    if (!std::filesystem::exists(p)) return std::nullopt;
    return read_file(p);
  };
  const std::optional<std::string> gpus_text = user_file("gpus.json"), models_text = user_file("models.json"),
                                   calibration_text = user_file("calibration.json"), clusters_text = user_file("clusters.json");
  // Parse errors name the file by its name alone ("gpus.json: ..."): the folder makes it the user's file.
  std::string folder = data_dir->string();
  if (!folder.ends_with('/')) folder += '/';
  try {
    if (gpus_text) {
      merge_by_name(c.gpus_, parse_gpus(*gpus_text), [](const gpu_spec& g) { return g.name; });
      check_gpu_names(c.gpus_, "gpus.json");  // a new GPU named as a built-in one's alias, or the reverse
    }
    if (models_text) {
      merge_by_name(c.models_, parse_models(*models_text), [](const model_preset& m) { return m.spec.name; });
      check_model_names(c.models_, "models.json");  // a new preset under a built-in one's repository, or the reverse
    }
    if (calibration_text) c.apply_calibration(*calibration_text, false);
    if (clusters_text) merge_cluster_tables(c.clusters_, parse_cluster_tables(*clusters_text));
    // Again after the user's files: their GPUs may name clusters, and their clusters GPUs.
    if (gpus_text || clusters_text) resolve_cluster_tables(c.clusters_, c.gpus_);
    c.attach_usual_clusters();
  } catch (const input_error& e) {
    throw input_error(folder + e.what());
  }
  return c;
}

namespace {

// "; did you mean 'x'?" when a name is close to `given` (planner/util/names.hpp, closest_name), else "".
std::string did_you_mean(std::string_view given, const std::vector<std::string>& names) {
  std::vector<std::string_view> views(names.begin(), names.end());
  const std::string_view close = closest_name(given, views);
  return close.empty() ? std::string() : fmt::format("; did you mean '{}'?", close);
}

}  // namespace

std::vector<std::string> catalog::gpu_names_and_aliases() const {
  std::vector<std::string> names;
  for (const gpu_spec& g : gpus_) {
    names.push_back(g.name);
    for (const std::string& a : g.aliases) names.push_back(a);
  }
  return names;
}

const gpu_spec& catalog::gpu(std::string_view name) const {
  const std::string key = lower(name);
  for (const gpu_spec& g : gpus_) {
    if (g.name == key || std::find(g.aliases.begin(), g.aliases.end(), key) != g.aliases.end()) return g;
  }
  std::string known;
  for (const gpu_spec& g : gpus_) known += (known.empty() ? "" : ", ") + g.name;
  throw input_error(fmt::format("--gpu: unknown GPU '{}' (known: {}){}", name, known, did_you_mean(name, gpu_names_and_aliases())));
}

const gpu_spec* catalog::gpu_by_device_name(std::string_view device_name) const {
  const std::string key = lower(device_name);
  for (const gpu_spec& g : gpus_) {
    for (const std::string& n : g.device_names)
      if (lower(n) == key) return &g;
    if (g.name == key || std::find(g.aliases.begin(), g.aliases.end(), key) != g.aliases.end()) return &g;
  }
  return nullptr;
}

const model_preset* catalog::find_model(std::string_view name) const {
  std::string key = lower(name);
  // A repository as its page's URL: https://huggingface.co/owner/name, with or without the scheme.
  for (const std::string_view prefix : {"https://", "http://"})
    if (key.starts_with(prefix)) key.erase(0, prefix.size());
  for (const std::string_view host : {"huggingface.co/", "hf.co/"})
    if (key.starts_with(host)) key.erase(0, host.size());
  while (key.size() > 1 && key.back() == '/') key.pop_back();
  for (const model_preset& m : models_)
    if (m.spec.name == key || (!m.hf_repo.empty() && lower(m.hf_repo) == key)) return &m;
  return nullptr;
}

const model_preset& catalog::model(std::string_view name) const {
  if (const model_preset* m = find_model(name)) return *m;
  throw input_error(unknown_model_message(name));
}

std::string catalog::unknown_model_message(std::string_view name, std::string_view also,
                                           const std::vector<std::string>& more_candidates) const {
  std::string known;
  for (const model_preset& m : models_) known += (known.empty() ? "" : ", ") + m.spec.name;
  std::vector<std::string> candidates;
  for (const model_preset& m : models_) {
    candidates.push_back(m.spec.name);
    if (!m.hf_repo.empty()) candidates.push_back(m.hf_repo);
  }
  candidates.insert(candidates.end(), more_candidates.begin(), more_candidates.end());
  return fmt::format("--model: unknown model '{}' (known: {}, or their Hugging Face repository ids, listed by "
                     "`plan models`; for another model give its config.json with --hf-config FILE){}{}{}",
                     name, known, also.empty() ? "" : "; ", also, did_you_mean(name, candidates));
}

const cluster_spec& catalog::cluster(std::string_view name, std::string_view option) const {
  for (const cluster_spec& c : clusters_.clusters)
    if (same_name(c.name, name)) return c;
  std::vector<std::string_view> known;
  for (const cluster_spec& c : clusters_.clusters) known.push_back(c.name);
  throw input_error(unknown_name_message(option, "cluster", name, known));
}

const cluster_spec* catalog::usual_cluster(const gpu_spec& gpu) const {
  if (gpu.node.empty()) return nullptr;
  for (const cluster_spec& c : clusters_.clusters)
    if (same_name(c.name, gpu.node)) return &c;
  return nullptr;  // resolve_cluster_tables refuses a node that names no cluster
}

const std::string& catalog::reference_gpu() const { return reference_gpu_; }

}  // namespace trainplan
