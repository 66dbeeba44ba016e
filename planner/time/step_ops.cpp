#include "planner/time/step_ops.hpp"

#include <algorithm>
#include <cmath>


namespace trainplan {

std::string_view op_class_name(op_class c) {
  switch (c) {
    case op_class::gemm: return "gemm";
    case op_class::attention: return "attention";
    case op_class::elementwise: return "elementwise";
    case op_class::loss: return "loss";
    case op_class::embedding: return "embedding";
    case op_class::optimizer: return "optimizer";
    case op_class::overhead: return "overhead";
  }
  return "?";
}

void repeat_micro_batches(step_ops& ops, std::uint64_t grad_accum) {
  const double mb = static_cast<double>(grad_accum);
  const std::size_t accumulation = ops.accumulation_ops < 0 ? ops.ops.size() : static_cast<std::size_t>(ops.accumulation_ops);
  for (std::size_t i = 0; i < ops.ops.size(); ++i) {
    step_op& op = ops.ops[i];
    if (op.cls != op_class::optimizer && !op.grad_scaler && i != accumulation && i != accumulation + 1)
      op.flops *= mb, op.bytes *= mb, op.kernels *= mb;
  }
  ops.launches.forward *= mb, ops.launches.recompute *= mb, ops.launches.backward *= mb;
  ops.micro_batches = mb;
  if (accumulation == ops.ops.size()) return;
  // The first micro-batch's backward creates each .grad (AccumulateGrad steals the incoming buffer), the
  // later ones add to it: mb - 1 times. The loop divides every micro-batch's loss when there are several.
  auto scale = [&](step_op& op, double times, double forward_launches) {
    op.bytes *= times, op.kernels *= times;
    ops.launches.forward += forward_launches * times;
    ops.launches.backward += op.kernels - forward_launches * times;
  };
  scale(ops.ops[accumulation], mb - 1, 0);
  scale(ops.ops[accumulation + 1], mb > 1 ? mb : 0, 1);
}

}  // namespace trainplan
