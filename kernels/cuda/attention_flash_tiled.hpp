#pragma once
// The tensor-core flash attention kernels for attention_flash.cu's public ops: WMMA with the score tiles in
// shared memory (attention_flash_tiled.cu) and mma.sync with the scores in registers (attention_flash_mma.cu).
// Both take the same shapes (tiled_flash_usable) and give the same results up to summation order.
// Plain C++: no CUDA headers.
#include "kernels/attention.hpp"
#include "kernels/view.hpp"

namespace trainplan::kernels::cuda {

// bf16/fp16 qkv, head_dim in {16, 32, ..., 128}, whole groups, 16-byte aligned, sizes that fit int, and
// blocks whose shared memory fits the device's opt-in limit.
bool tiled_flash_usable(const attention_shape& sh, const view& qkv);
void tiled_flash_forward(const attention_shape& sh, const view& qkv, const attention_dropout& drop, const view& out,
                         const view& lse);
// After the delta kernel: delta holds rowsum(d_out * out).
void tiled_flash_backward(const attention_shape& sh, const view& qkv, const view& lse, const attention_dropout& drop,
                          const view& d_out, const view& delta, const view& d_qkv);

void mma_flash_forward(const attention_shape& sh, const view& qkv, const attention_dropout& drop, const view& out,
                       const view& lse);
void mma_flash_backward(const attention_shape& sh, const view& qkv, const view& lse, const attention_dropout& drop,
                        const view& d_out, const view& delta, const view& d_qkv);

}  // namespace trainplan::kernels::cuda
