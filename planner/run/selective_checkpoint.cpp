#include "planner/run/selective_checkpoint.hpp"

#include "planner/util/checked_math.hpp"

namespace trainplan {

std::array<layer_matmul, 7> dense_layer_matmuls(const model_spec& m) {
  const std::uint64_t h = m.hidden, f = m.dense_mlp_width();
  return {{{"q_proj", h, m.q_width()},
           {"k_proj", h, m.kv_width()},
           {"v_proj", h, m.v_width()},
           {"o_proj", m.out_width(), h},
           {"gate_proj", h, f},
           {"up_proj", h, f},
           {"down_proj", f, h}}};
}

std::uint64_t op_policy_recomputed_matmul_weights(const model_spec& m) {
  std::uint64_t weights = 0, call = 0;
  for (const layer_matmul& mm : dense_layer_matmuls(m))
    if (!op_policy_saves_matmul(++call)) weights = checked_add(weights, checked_mul(mm.in, mm.out, "matmul weights"), "matmul weights");
  return weights;
}

}  // namespace trainplan
