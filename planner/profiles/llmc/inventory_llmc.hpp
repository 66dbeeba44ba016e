#pragma once
// The buffers of llm.c (karpathy/llm.c, train_gpt2.cu at f1e2ace6) for --framework llmc. llm.c allocates
// everything once: parameters and, lazily, gradients, AdamW state and master weights in one block each,
// and every layer's activations in one block, so the step's memory is the sum of those blocks.
#include "planner/memory/inventory.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/run/precision.hpp"
#include "planner/run/run_config.hpp"

namespace trainplan {

// A C++/CUDA/cuBLAS process's CUDA context on an H100 (driver 580, CUDA 13.0): about 0.51 GiB, as measured
// for this project's own harness, a program of the same kind (its H100 run in data/measurements).
constexpr std::uint64_t cuda_program_context_bytes = 547608330;  // 0.51 GiB

// llm.c's cuBLASLt workspace (llmc/cublas_common.h): 32 MiB.
constexpr std::uint64_t llmc_cublaslt_workspace_bytes = 32ull << 20;

// Throws input_error for what llm.c cannot run: other than GPT-2, dropout, tensor/pipeline parallelism,
// ZeRO beyond stage 1, offload, adapters, precisions other than its bf16 (fp32 master) and fp32 builds.
void check_llmc_run(const model_spec& m, const run_config& run, const precision_layout& layout);

inventory build_llmc_inventory(const model_spec& m, const run_config& run, const precision_layout& layout);

}  // namespace trainplan
