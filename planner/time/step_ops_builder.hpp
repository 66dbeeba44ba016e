#pragma once
// Internal to planner/step_ops*.cpp: rows of forward/backward work, multiplied out to one step.
#include <vector>

#include "planner/time/step_ops.hpp"

namespace trainplan::ops {

// One group of rows that run together the same number of times per step: a layer's rows run once per
// micro-batch and layer (forward again when recomputed), the head's once per micro-batch.
struct row_group {
  step_ops& out;
  double forwards = 0;            // forward passes per step of these rows (recomputation included)
  double backwards = 0;           // backward passes per step
  double attention_forwards = 0;  // forwards of the attention core (selective recomputation reruns only it)
  double share = 1;               // this GPU's share of the work (1 / tp for tensor-parallel rows)
  // Kernels per pass of the rows added so far (attention-core rows apart: selective recomputation reruns
  // them alone), summed here and multiplied out once by flush_launches().
  double forward_kernels = 0, attention_forward_kernels = 0, backward_kernels = 0;
  // Set while adding an op whose output a selective checkpoint policy keeps (torchtitan's per-op policy:
  // planner/run/selective_checkpoint.hpp): its forward runs once a backward, never again in recomputation.
  bool output_saved = false;
  double saved_forward_kernels = 0;

  // An op with its forward and backward costs per pass; the backward may launch nothing.
  void add(std::string_view name, op_class cls, double fwd_bytes, double fwd_kernels, double bwd_bytes,
           double bwd_kernels, double fwd_flops = 0, double bwd_flops = 0, bool attention_core = false) {
    const double f = output_saved ? backwards : attention_core ? attention_forwards : forwards;
    const double flops = (f * fwd_flops + backwards * bwd_flops) * share;
    const double bytes = (f * fwd_bytes + backwards * bwd_bytes) * share;
    const double kernels = f * fwd_kernels + backwards * bwd_kernels;
    if (kernels == 0 && bytes == 0) return;
    // One first forward a backward; further forwards are recomputation.
    // The share cancels: backwards of the f + backwards passes' work is the first forwards'.
    const double forward_work = flops > 0 ? backwards * fwd_flops / (f * fwd_flops + backwards * bwd_flops)
                                : bytes > 0 ? backwards * fwd_bytes / (f * fwd_bytes + backwards * bwd_bytes) : 1;
    (output_saved ? saved_forward_kernels : attention_core ? attention_forward_kernels : forward_kernels) += fwd_kernels;
    backward_kernels += bwd_kernels;
    emplace(name, cls, false, flops, bytes, kernels, 0, 0, 0, forward_work);
  }

  // y[m, n] = x[m, k] W[k, n]: forward one GEMM; backward the input gradient and, when the weight trains
  // (or, for attention's score and value products, when both operands need gradients), its gradient: two
  // GEMMs of the same FLOPs. in/out: element bytes of the inputs and the output. count: GEMMs of this shape
  // per pass, each its own launch unless strided_batched (torch.matmul over batch and heads: one
  // cublasGemmStridedBatched launch for all of them).
  void gemm(std::string_view name, double m, double n, double k, double in, double out_bytes, bool trains = true,
            op_class cls = op_class::gemm, double count = 1, bool attention_core = false,
            bool strided_batched = false) {
    const double fwd_flops = 2 * m * n * k * count;
    const double fwd_bytes = ((m * k + k * n) * in + m * n * out_bytes) * count;
    const double grads = trains ? 2 : 1;
    const double f = output_saved ? backwards : attention_core ? attention_forwards : forwards;
    const double launches = strided_batched ? 1 : count;
    (output_saved ? saved_forward_kernels : attention_core ? attention_forward_kernels : forward_kernels) += launches;
    backward_kernels += grads * launches;
    emplace(name, cls, true, (f * fwd_flops + backwards * grads * fwd_flops) * share,
            (f * fwd_bytes + backwards * grads * fwd_bytes) * share, (f + backwards * grads) * launches, m, n, k,
            f + backwards > 0 ? backwards / (f + backwards * grads) : 1);
  }

  // Adds this group's launches to the step's by phase: the first forward of each backward, the rerun
  // forwards, the backward. Once per group, after its last row.
  void flush_launches() {
    out.launches.forward += backwards * (forward_kernels + attention_forward_kernels + saved_forward_kernels);
    out.launches.recompute += (forwards - backwards) * forward_kernels + (attention_forwards - backwards) * attention_forward_kernels;
    out.launches.backward += backwards * backward_kernels;
    forward_kernels = attention_forward_kernels = backward_kernels = saved_forward_kernels = 0;
  }

  // Writes the op field by field into the list: a step_op assembled elsewhere and copied in costs more than
  // the arithmetic (millions of configurations in a sweep, dozens of ops each).
  void emplace(std::string_view name, op_class cls, bool gemm_shaped, double flops, double bytes, double kernels,
               double m, double n, double k, double forward_share) {
    step_op& op = out.ops.emplace_back();
    op.name = name;
    op.cls = cls;
    op.gemm_shaped = gemm_shaped;
    op.flops = flops;
    op.bytes = bytes;
    op.kernels = kernels;
    op.m = m, op.n = n, op.k = k;
    op.forward_share = static_cast<float>(forward_share);
  }
};

}  // namespace trainplan::ops
