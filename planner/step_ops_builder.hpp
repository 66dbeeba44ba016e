#pragma once
// Internal to planner/step_ops*.cpp: rows of forward/backward work, multiplied out to one step.
#include <vector>

#include "planner/step_ops.hpp"

namespace trainplan::ops {

// One group of rows that run together the same number of times per step: a layer's rows run once per
// micro-batch and layer (forward again when recomputed), the head's once per micro-batch.
struct row_group {
  std::vector<step_op>& out;
  double forwards = 0;            // forward passes per step of these rows (recomputation included)
  double backwards = 0;           // backward passes per step
  double attention_forwards = 0;  // forwards of the attention core (selective recomputation reruns only it)
  double share = 1;               // this GPU's share of the work (1 / tp for tensor-parallel rows)

  // An op with its forward and backward costs per pass; the backward may launch nothing.
  void add(std::string_view name, op_class cls, double fwd_bytes, double fwd_kernels, double bwd_bytes,
           double bwd_kernels, double fwd_flops = 0, double bwd_flops = 0, bool attention_core = false) {
    const double f = attention_core ? attention_forwards : forwards;
    step_op op;
    op.name = name;
    op.cls = cls;
    op.flops = (f * fwd_flops + backwards * bwd_flops) * share;
    op.bytes = (f * fwd_bytes + backwards * bwd_bytes) * share;
    op.kernels = f * fwd_kernels + backwards * bwd_kernels;
    if (op.kernels > 0 || op.bytes > 0) out.push_back(op);
  }

  // y[m, n] = x[m, k] W[k, n]: forward one GEMM; backward the input gradient and, when the weight trains
  // (or, for attention's score and value products, when both operands need gradients), its gradient: two
  // GEMMs of the same FLOPs. in/out: element bytes of the inputs and the output. count: batched GEMMs.
  void gemm(std::string_view name, double m, double n, double k, double in, double out_bytes, bool trains = true,
            op_class cls = op_class::gemm, double count = 1, bool attention_core = false) {
    const double fwd_flops = 2 * m * n * k * count;
    const double fwd_bytes = ((m * k + k * n) * in + m * n * out_bytes) * count;
    const double grads = trains ? 2 : 1;
    const double f = attention_core ? attention_forwards : forwards;
    step_op op;
    op.name = name;
    op.cls = cls;
    op.gemm_shaped = true;
    op.m = m, op.n = n, op.k = k;
    op.flops = (f * fwd_flops + backwards * grads * fwd_flops) * share;
    op.bytes = (f * fwd_bytes + backwards * grads * fwd_bytes) * share;
    op.kernels = (f + backwards * grads) * count;
    out.push_back(op);
  }
};

}  // namespace trainplan::ops
