#pragma once
// `plan bench --backend cuda --kernels`: each kernel of a training step timed on the GPU at one model's
// shapes, beside its roofline (its FLOPs at the GPU's dense peak or its bytes at the memory bandwidth,
// whichever takes longer), so a slow kernel or a regression shows by name.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/ops_table.hpp"
#include "planner/system/gpu_spec.hpp"
#include "planner/model/model_spec.hpp"

namespace trainplan::cli {

struct kernel_timing {
  std::string kernel;        // "flash_attention_backward"
  std::string shape;         // "b16 s1024 a12 d64"
  double flops = 0;          // the algorithm's minimum (a causal mask halves attention's), not what the kernel did
  double bytes = 0;          // read and written once each
  double seconds = 0;        // mean over the repetitions, launch included
  double roofline_seconds = 0;
};

// Times every kernel the harness's bf16-mixed step calls for model `m` at (batch, seq): GEMMs, norms,
// activations, attention (flash and eager), the loss, AdamW, embeddings. Buffers come from `ops` (the
// device arena); their contents are zeros, which no kernel's speed depends on. With `flash_kernel` (the
// backend's selector, kernels/cuda/backend_api.hpp), flash attention is timed once per kernel variant ("mma",
// "wmma"), the variant in the row's name, and the selection is restored after. `on_row` sees each timing as
// it is made, so a kernel that faults still leaves the rows before it printed.
std::vector<kernel_timing> time_kernels(const kernels::kernel_ops& ops, const gpu_spec& gpu, const model_spec& m,
                                        std::uint64_t batch, std::uint64_t seq,
                                        const char* (*flash_kernel)(const char*) = nullptr,
                                        const std::function<void(const kernel_timing&)>& on_row = {});

}  // namespace trainplan::cli
