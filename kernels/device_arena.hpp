#pragma once
// Where buffers go inside one block of device memory reserved up front (a training step that
// never calls the driver to allocate or free). Only the bookkeeping lives here, in plain C++ so it is
// tested without a GPU: offsets into the block, best fit over the free ranges (the range at the end taken
// last, so that the placement does not depend on the capacity), neighbours merged on release. The CUDA backend (kernels/cuda/runtime.cu) turns an offset into a pointer.
//
// Offsets are aligned to 256 bytes, as cudaMalloc aligns its pointers (CUDA C++ Programming Guide,
// "Device Memory Accesses": 256-byte alignment of allocations), so vectorised kernels see the same
// alignment either way.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>

namespace trainplan::kernels {

// What the CUDA backend leaves to the driver when it reserves the arena (kernels/cuda/runtime.cu): all free
// memory but this, for what the driver allocates on its own: kernels' local memory (sized at launch for every
// resident thread), the runtime's and cuBLAS's internal buffers. 1.5 GiB: the scalar flash fallback's 2 KiB
// stack frame per thread (ptxas) alone takes about 528 MiB on an H100 (2,048 resident threads on each of 132
// SMs), and the lazily loaded cuBLAS and cuBLASLt modules come on top.
constexpr std::uint64_t arena_driver_headroom_bytes = 3ull << 29;

// TRAINPLAN_ARENA_BYTES, when set, caps the arena below what the driver's headroom leaves: a byte count, or
// whole MiB or GiB with an M or G suffix ("8G"). A profiler that replays kernels (ncu) saves and restores the
// memory a kernel may touch around each replay, which with the whole GPU reserved is 80 GB a kernel. Nothing
// for text that is not such a count (empty, a sign, another suffix, zero, past 64 bits).
std::optional<std::uint64_t> parse_arena_bytes(const char* text);

// What a backend's alloc throws when the memory is not there (the host's allocation fails with
// std::bad_alloc instead). The tracking allocator reports either as the run's out-of-memory result, and
// lets every other error (a CUDA fault surfacing in the zero fill, say) propagate as what it is.
struct device_out_of_memory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class device_arena {
 public:
  static constexpr std::uint64_t alignment_bytes = 256;

  explicit device_arena(std::uint64_t capacity_bytes);

  // The offset of a new block of `bytes` (rounded up to the alignment; 0 bytes take one unit), or nothing
  // when no free range is large enough: the caller reports running out of memory.
  std::optional<std::uint64_t> allocate(std::uint64_t bytes);
  // Returns the block at `offset` (from allocate) to the free ranges. Throws std::logic_error for an
  // offset that is not a live block.
  void release(std::uint64_t offset);

  std::uint64_t capacity_bytes() const { return capacity_bytes_; }
  std::uint64_t live_bytes() const { return live_bytes_; }  // rounded sizes of the live blocks
  // The end of the highest live block: the device memory the live blocks need from the start of the
  // arena, fragmentation included.
  std::uint64_t extent_bytes() const;
  std::uint64_t peak_extent_bytes() const { return peak_extent_bytes_; }
  std::uint64_t largest_free_bytes() const;
  std::size_t live_blocks() const { return live_.size(); }

  static std::uint64_t rounded(std::uint64_t bytes);

 private:
  std::uint64_t capacity_bytes_;
  std::uint64_t live_bytes_ = 0, peak_extent_bytes_ = 0;
  std::map<std::uint64_t, std::uint64_t> free_;  // offset -> bytes, never two adjacent
  std::map<std::uint64_t, std::uint64_t> live_;  // offset -> bytes
};

// The arena over real memory: a block at `base` of `capacity_bytes`, handing out zero-filled pointers. The
// CUDA backend gives it device memory and cudaMemsetAsync; the tests give it host memory and memset, so
// the harness runs on it with the CPU kernels exactly as on the GPU.
class arena_memory {
 public:
  using zero_fill_fn = void (*)(void* ptr, std::size_t bytes);
  arena_memory(void* base, std::uint64_t capacity_bytes, zero_fill_fn zero_fill)
      : base_(static_cast<std::byte*>(base)), arena_(base ? capacity_bytes : 0), zero_fill_(zero_fill) {}

  // Throws device_out_of_memory ("out of memory: ...") when no free range holds `bytes`: the tracking
  // allocator reports it as the run's result.
  void* allocate(std::size_t bytes);
  void release(void* ptr);  // a pointer from allocate
  const device_arena& arena() const { return arena_; }

 private:
  std::byte* base_;
  device_arena arena_;
  zero_fill_fn zero_fill_;
};

}  // namespace trainplan::kernels
