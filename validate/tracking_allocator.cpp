// The tracking allocator (tracking_allocator.hpp): every allocation and free under its inventory name, the
// live bytes, the peak and what was live at it, each phase's largest live bytes; and the tensor handle that
// frees its buffer.
#include "validate/tracking_allocator.hpp"

#include <algorithm>
#include <cctype>
#include <new>

#include "kernels/device_arena.hpp"
#include "planner/util/checked_math.hpp"

namespace trainplan::validate {

std::string name_template(const std::string& name) {
  if (!name.starts_with("layer")) return name;
  std::size_t end = 5;
  while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
  if (end == 5) return name;
  return "layer{}" + name.substr(end);
}

tensor& tensor::operator=(tensor&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = other.owner_;
    id_ = other.id_;
    name_ = std::move(other.name_);
    shape_ = std::move(other.shape_);
    type_ = other.type_;
    elements_ = other.elements_;
    storage_ = other.storage_;
    other.owner_ = nullptr;
    other.storage_ = nullptr;
  }
  return *this;
}

void tensor::reset() {
  if (owner_) {
    owner_->ops().release(storage_);
    owner_->release(id_, bytes());
  }
  owner_ = nullptr;
  storage_ = nullptr;
}

void tensor::fill(float value) const { owner_->ops().fill(view(), value, static_cast<std::size_t>(elements_)); }

tensor tracking_allocator::allocate(std::string name, std::vector<std::uint64_t> shape, dtype type) {
  std::uint64_t elements = 1;
  for (std::uint64_t d : shape) elements = checked_mul(elements, d, "harness tensor " + name);
  const std::uint64_t bytes = checked_mul(elements, dtype_bytes(type), "harness tensor " + name);
  tensor t;
  t.owner_ = this;
  t.id_ = next_id_++;
  t.name_ = std::move(name);
  t.shape_ = std::move(shape);
  t.type_ = type;
  t.elements_ = elements;
  try {
    t.storage_ = ops_.alloc(static_cast<std::size_t>(bytes));  // zero-filled
  } catch (const kernels::device_out_of_memory& e) {  // the device arena is full
    t.owner_ = nullptr;  // nothing to release
    throw out_of_memory(e.what(), t.name_, bytes, phases_.back().label);
  } catch (const std::bad_alloc&) {  // the host backend's calloc failed
    t.owner_ = nullptr;
    throw out_of_memory("out of host memory", t.name_, bytes, phases_.back().label);
  }

  const std::string tmpl = name_template(t.name_);
  auto [it, inserted] = bytes_by_template_.emplace(tmpl, bytes);
  if (!inserted && it->second != bytes) inconsistent_ = true;

  live_[t.id_] = {t.name_, bytes};
  live_bytes_ += bytes;
  device_peak_bytes_ = std::max(device_peak_bytes_, ops_.device_used_bytes());
  phase_record& phase = phases_.back();
  phase.max_live_bytes = std::max(phase.max_live_bytes, live_bytes_);
  if (live_bytes_ > peak_bytes_) {
    peak_bytes_ = live_bytes_;
    peak_phase_index_ = phases_.size() - 1;
    live_at_peak_.clear();
    for (const auto& [id, buf] : live_) live_at_peak_.push_back(buf);
  }
  return t;
}

void tracking_allocator::release(std::uint64_t id, std::uint64_t bytes) {
  live_.erase(id);
  live_bytes_ -= bytes;
}

void tracking_allocator::mark_phase(phase_record phase) {
  phase.max_live_bytes = live_bytes_;
  phases_.push_back(std::move(phase));
}

}  // namespace trainplan::validate
