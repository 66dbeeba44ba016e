#pragma once
// Every buffer of the harness is allocated here under its inventory name ("layer3.attn.softmax",
// "adam.m"). The allocator keeps the live bytes, the peak and what was live at it, the largest live
// bytes of every phase (an event of the step timeline), and the size each name was allocated with.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/ops_table.hpp"
#include "kernels/view.hpp"
#include "planner/util/dtype.hpp"

namespace trainplan::validate {

class tracking_allocator;

// The backend could not allocate a buffer (a GPU out of memory): a result of the run, not a crash.
class out_of_memory : public std::runtime_error {
 public:
  out_of_memory(const std::string& what, std::string buffer, std::uint64_t bytes, std::string phase)
      : std::runtime_error(what), buffer_name(std::move(buffer)), requested_bytes(bytes), phase_label(std::move(phase)) {}
  std::string buffer_name;
  std::uint64_t requested_bytes;
  std::string phase_label;
};

// An owning buffer. Freed (and un-tracked) when destroyed or reset.
class tensor {
 public:
  tensor() = default;
  tensor(tensor&& other) noexcept { *this = std::move(other); }
  tensor& operator=(tensor&& other) noexcept;
  tensor(const tensor&) = delete;
  tensor& operator=(const tensor&) = delete;
  ~tensor() { reset(); }

  void reset();
  bool empty() const { return owner_ == nullptr; }
  explicit operator bool() const { return !empty(); }

  const std::string& name() const { return name_; }
  const std::vector<std::uint64_t>& shape() const { return shape_; }
  dtype type() const { return type_; }
  std::uint64_t elements() const { return elements_; }
  std::uint64_t bytes() const { return elements_ * dtype_bytes(type_); }
  kernels::view view() const { return {storage_, type_, static_cast<std::size_t>(elements_)}; }
  void fill(float value) const;  // through the backend's fill: the storage may be device memory

 private:
  friend class tracking_allocator;
  tracking_allocator* owner_ = nullptr;
  std::uint64_t id_ = 0;
  std::string name_;
  std::vector<std::uint64_t> shape_;
  dtype type_ = dtype::fp32;
  std::uint64_t elements_ = 0;
  void* storage_ = nullptr;  // the backend's memory (host for cpu, device for cuda), zero-filled
};

struct phase_record {
  std::string label;         // "step 1, micro-batch 1, forward layer 3"
  int step = 0;
  std::uint64_t micro_batch = 0;
  std::string kind;          // "fwd_layer", "loss", ... (planner event kinds)
  std::uint64_t layer = 0;
  std::uint64_t max_live_bytes = 0;
};

struct live_buffer {
  std::string name;
  std::uint64_t bytes = 0;
};

class tracking_allocator {
 public:
  explicit tracking_allocator(const kernels::kernel_ops& ops = kernels::cpu_kernel_ops()) : ops_(ops) {}
  tracking_allocator(const tracking_allocator&) = delete;
  tracking_allocator& operator=(const tracking_allocator&) = delete;

  const kernels::kernel_ops& ops() const { return ops_; }
  tensor allocate(std::string name, std::vector<std::uint64_t> shape, dtype type);
  // Starts a new phase; allocations until the next mark belong to it.
  void mark_phase(phase_record phase);

  std::uint64_t live_bytes() const { return live_bytes_; }
  std::uint64_t peak_bytes() const { return peak_bytes_; }
  const phase_record& peak_phase() const { return phases_.at(peak_phase_index_); }
  const std::vector<live_buffer>& live_at_peak() const { return live_at_peak_; }
  const std::vector<phase_record>& phases() const { return phases_; }
  // Bytes each name was first allocated with (the layer index replaced by {} for per-layer buffers).
  const std::map<std::string, std::uint64_t>& bytes_by_template() const { return bytes_by_template_; }
  // True when some name was allocated with two different sizes.
  bool inconsistent_sizes() const { return inconsistent_; }
  // The most device memory in use right after any allocation (0 without a device): context, workspace,
  // caching rounding and all, as cudaMemGetInfo reports.
  std::uint64_t device_peak_bytes() const { return device_peak_bytes_; }

 private:
  friend class tensor;
  void release(std::uint64_t id, std::uint64_t bytes);

  const kernels::kernel_ops ops_;  // a copy (function pointers): a temporary table passed in cannot dangle
  std::uint64_t device_peak_bytes_ = 0;
  std::uint64_t next_id_ = 1;
  std::uint64_t live_bytes_ = 0, peak_bytes_ = 0;
  std::size_t peak_phase_index_ = 0;
  std::map<std::uint64_t, live_buffer> live_;
  std::vector<live_buffer> live_at_peak_;
  std::vector<phase_record> phases_{phase_record{"setup", 0, 0, "setup", 0, 0}};
  std::map<std::string, std::uint64_t> bytes_by_template_;
  bool inconsistent_ = false;
};

// "layer12.attn.qkv" -> "layer{}.attn.qkv"; other names unchanged.
std::string name_template(const std::string& name);

}  // namespace trainplan::validate
