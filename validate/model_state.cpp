// The harness's per-parameter buffers (model_state.hpp): the slots laid out layer by layer as a state_dict
// lists them, initial values hashed from (seed, parameter, element) and filled on several threads, and
// gradients and Adam state allocated when first needed.
#include "validate/model_state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "kernels/dropout.hpp"
#include "planner/model/param_count.hpp"

namespace trainplan::validate {

namespace {

// What a parameter starts as: the name decides it once, not once an element (init_value's string tests,
// run for each of a 1.5B model's elements, took a minute of every GPU validation run).
enum class init_kind { zero, one, random };

init_kind classify(const std::string& name) {
  if (name.ends_with(".bias")) return init_kind::zero;
  if (name.find("ln1.") != std::string::npos || name.find("ln2.") != std::string::npos || name.starts_with("final_norm."))
    return init_kind::one;
  return init_kind::random;
}

float initial_value(init_kind kind, std::uint64_t seed, std::size_t param_index, std::uint64_t i) {
  if (kind == init_kind::zero) return 0.0f;
  if (kind == init_kind::one) return 1.0f;
  const double u = kernels::uniform_hash(seed, param_index, i);  // [0, 1)
  return static_cast<float>(0.02 * std::sqrt(12.0) * (u - 0.5));
}

}  // namespace

float model_state::init_value(std::uint64_t seed, std::size_t param_index, const std::string& name, std::uint64_t i) {
  return initial_value(classify(name), seed, param_index, i);
}

model_state::model_state(const model_spec& m, std::uint64_t vocab_rows, const precision_layout& lay,
                         tracking_allocator& alloc, std::uint64_t seed)
    : layout(lay), alloc_(alloc) {
  if (vocab_rows < m.vocab) throw std::logic_error("model_state: fewer table rows than classes");
  model_spec stored = m;
  stored.vocab = vocab_rows;
  std::vector<std::pair<std::string, std::uint64_t>> expanded;
  for (const param_tensor& p : param_tensors(stored)) {
    if (!p.per_layer) {
      expanded.emplace_back(p.name, p.count);
      continue;
    }
    for (std::uint64_t l = 0; l < m.layers; ++l) {
      std::string name = p.name;
      name.replace(name.find("{}"), 2, std::to_string(l));
      expanded.emplace_back(name, p.count);
    }
  }
  // Order slots layer by layer, as the model's state_dict lists them.
  std::vector<std::pair<std::string, std::uint64_t>> ordered;
  for (const auto& e : expanded)
    if (!e.first.starts_with("layer")) ordered.push_back(e);
  for (std::uint64_t l = 0; l < m.layers; ++l)
    for (const auto& e : expanded)
      if (e.first.starts_with(fmt::format("layer{}.", l))) ordered.push_back(e);
  for (const auto& [name, count] : ordered) {
    slots_[name] = {params_, count};
    params_ += count;
  }

  weights = alloc_.allocate(fmt::format("weights.{}", dtype_name(lay.weights)), {params_}, lay.weights);
  if (lay.master) master = alloc_.allocate(fmt::format("master.{}", dtype_name(*lay.master)), {params_}, *lay.master);
  // Values are made on the host, in each buffer's dtype, then copied to where the backend computes.
  std::vector<std::byte> weights_host(params_ * dtype_bytes(lay.weights)), master_host;
  const kernels::view wh{weights_host.data(), lay.weights, static_cast<std::size_t>(params_)};
  kernels::view mh;
  if (lay.master) {
    master_host.resize(params_ * dtype_bytes(*lay.master));
    mh = {master_host.data(), *lay.master, static_cast<std::size_t>(params_)};
  }
  struct fill {
    std::uint64_t offset, count;
    init_kind kind;
    std::uint64_t zero_from;  // elements from here on are a table's padded rows: zero
  };
  std::vector<fill> fills;  // by parameter index, in slot order: offsets increase
  for (const auto& [name, count] : ordered) {
    const bool table = name == "embed.tokens" || name == "lm_head.weight";
    fills.push_back({slots_[name].offset, count, classify(name), table ? m.vocab * m.hidden : count});
  }
  // Every element's value depends on (seed, parameter, element) alone, so the buffer is cut into one range
  // a thread; each fills the parts of the parameters its range covers.
  auto fill_range = [&](std::uint64_t begin, std::uint64_t end) {
    for (std::size_t index = 0; index < fills.size(); ++index) {
      const fill& f = fills[index];
      const std::uint64_t from = std::max(begin, f.offset), to = std::min(end, f.offset + f.count);
      for (std::uint64_t e = from; e < to; ++e) {
        const float v = e - f.offset < f.zero_from ? initial_value(f.kind, seed, index, e - f.offset) : 0.0f;
        if (lay.master) mh.set(e, v);
        wh.set(e, v);
      }
    }
  };
  const std::uint64_t threads = std::clamp<std::uint64_t>(std::thread::hardware_concurrency(), 1, 32);
  const std::uint64_t per_thread = (params_ + threads - 1) / threads;
  std::vector<std::thread> workers;
  std::uint64_t filled_from = params_;  // what no worker took: this thread fills it
  for (std::uint64_t t = 1; t < threads && t * per_thread < params_; ++t) {
    try {
      workers.emplace_back(fill_range, t * per_thread, std::min(params_, (t + 1) * per_thread));
    } catch (const std::system_error&) {  // no thread to be had: the rest here
      filled_from = t * per_thread;
      break;
    }
  }
  fill_range(0, std::min(params_, per_thread));
  if (filled_from < params_) fill_range(filled_from, params_);
  for (std::thread& w : workers) w.join();
  alloc_.ops().upload(weights.view().data, weights_host.data(), weights_host.size());
  if (lay.master) alloc_.ops().upload(master.view().data, master_host.data(), master_host.size());
}

kernels::view model_state::slot_view(const tensor& t, const std::string& name) const {
  auto it = slots_.find(name);
  if (it == slots_.end()) throw std::logic_error("no parameter named " + name);
  return t.view().slice(it->second.offset, it->second.count);
}

void model_state::ensure_grads() {
  if (grads) return;
  grads = alloc_.allocate(fmt::format("grads.{}", dtype_name(layout.grads)), {params_}, layout.grads);
  if (layout.grad_accum)
    grads_accum = alloc_.allocate(fmt::format("grads.{}", dtype_name(*layout.grad_accum)), {params_}, *layout.grad_accum);
}

void model_state::ensure_optimizer_state() {
  if (adam_m) return;
  adam_m = alloc_.allocate("adam.m", {params_}, layout.optimizer_state);
  adam_v = alloc_.allocate("adam.v", {params_}, layout.optimizer_state);
}

void model_state::release_grads() {
  grads.reset();
  grads_accum.reset();
}

}  // namespace trainplan::validate
