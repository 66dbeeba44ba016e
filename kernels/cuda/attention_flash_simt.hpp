#pragma once
// Flash attention for fp32 qkv on the CUDA cores (attention_flash_simt.cu), for attention_flash.cu's public
// ops: the simple kernels' arithmetic with rows in registers and tiles in shared memory. Plain C++.
#include "kernels/attention.hpp"
#include "kernels/view.hpp"

namespace trainplan::kernels::cuda {

// fp32 qkv (and d_out in the backward), head_dim in {16, 32, ..., 128}, whole groups, a grid that fits.
bool simt_flash_usable(const attention_shape& sh, const view& qkv);
void simt_flash_forward(const attention_shape& sh, const view& qkv, const attention_dropout& drop, const view& out,
                        const view& lse);
// After the delta kernel: delta holds rowsum(d_out * out).
void simt_flash_backward(const attention_shape& sh, const view& qkv, const view& lse, const attention_dropout& drop,
                         const view& d_out, const view& delta, const view& d_qkv);

}  // namespace trainplan::kernels::cuda
