#pragma once
// How the model is trained: sequence, batch, precision, optimizer, recomputation, attention kernel.
#include <cstdint>
#include <string_view>

#include "planner/optimizer.hpp"
#include "planner/precision.hpp"

namespace trainplan {

// none: every activation a layer's backward needs is kept from its forward.
// selective: the attention core (QK^T, softmax, dropout, attention over V) is recomputed in backward
//   (Korthikanti et al. 2022, Sec. 5): the 5as^2b term goes, 34sbh stays.
// full: only each layer's input is kept (2sbh); the layer's forward is rerun during its backward.
enum class recompute_mode { none, selective, full };

// eager: the s x s softmax is materialized (and saved). flash: tiled attention with online softmax
// (Dao et al. 2022) saves only the output and the fp32 log-sum-exp per row, recomputing in backward.
enum class attention_kind { eager, flash };

std::string_view recompute_name(recompute_mode r);
recompute_mode parse_recompute(std::string_view text);  // throws input_error
std::string_view attention_name(attention_kind a);
attention_kind parse_attention(std::string_view text);  // throws input_error

struct run_config {
  std::uint64_t seq = 0;
  std::uint64_t micro_batch = 1;
  std::uint64_t grad_accum = 1;
  precision_regime precision = precision_regime::bf16_mixed;
  grad_dtype_choice grad_dtype = grad_dtype_choice::automatic;
  optimizer_kind optimizer = optimizer_kind::adamw;
  recompute_mode recompute = recompute_mode::none;
  attention_kind attention = attention_kind::flash;
  double dropout = 0.0;

  std::uint64_t global_batch() const { return micro_batch * grad_accum; }  // sequences per step
};

}  // namespace trainplan
