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
    const double flops = (f * fwd_flops + backwards * bwd_flops) * share;
    const double bytes = (f * fwd_bytes + backwards * bwd_bytes) * share;
    const double kernels = f * fwd_kernels + backwards * bwd_kernels;
    if (kernels > 0 || bytes > 0) emplace(name, cls, false, flops, bytes, kernels, 0, 0, 0);
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
    emplace(name, cls, true, (f * fwd_flops + backwards * grads * fwd_flops) * share,
            (f * fwd_bytes + backwards * grads * fwd_bytes) * share, (f + backwards * grads) * count, m, n, k);
  }

  // Writes the op field by field into the list: a step_op assembled elsewhere and copied in costs more than
  // the arithmetic (millions of configurations in a sweep, dozens of ops each).
  void emplace(std::string_view name, op_class cls, bool gemm_shaped, double flops, double bytes, double kernels,
               double m, double n, double k) {
    step_op& op = out.emplace_back();
    op.name = name;
    op.cls = cls;
    op.gemm_shaped = gemm_shaped;
    op.flops = flops;
    op.bytes = bytes;
    op.kernels = kernels;
    op.m = m, op.n = n, op.k = k;
  }
};

}  // namespace trainplan::ops
