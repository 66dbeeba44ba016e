// The CPU backend's table (ops_table.hpp, cpu_kernel_ops): host memory from calloc, memcpy for copies, and
// every CPU reference kernel in the slot the shared list gives it.
#include "kernels/ops_table.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

namespace trainplan::kernels {
namespace {

void* host_alloc(std::size_t bytes) {
  void* p = std::calloc(bytes == 0 ? 1 : bytes, 1);
  if (!p) throw std::bad_alloc();
  return p;
}
void host_release(void* p) { std::free(p); }
void host_copy(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
void host_synchronize() {}
std::uint64_t no_device() { return 0; }

}  // namespace

const kernel_ops& cpu_kernel_ops() {
  static const kernel_ops ops = [] {
    kernel_ops o;
    o.backend = "cpu";
    o.alloc = host_alloc;
    o.release = host_release;
    o.upload = host_copy;
    o.download = host_copy;
    o.synchronize = host_synchronize;
    o.device_used_bytes = no_device;
#define TRAINPLAN_KERNEL_ASSIGN(name) o.name = ::trainplan::kernels::name;
    TRAINPLAN_KERNEL_OPS(TRAINPLAN_KERNEL_ASSIGN)
    TRAINPLAN_CPU_ONLY_KERNEL_OPS(TRAINPLAN_KERNEL_ASSIGN)
#undef TRAINPLAN_KERNEL_ASSIGN
    return o;
  }();
  return ops;
}

}  // namespace trainplan::kernels
