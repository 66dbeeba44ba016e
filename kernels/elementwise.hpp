#pragma once
// Small pointwise ops the training step needs between the big kernels: residual adds through dropout,
// dtype conversion, fills, accumulation.
#include <cstddef>

#include "kernels/view.hpp"

namespace trainplan::kernels {

// y = residual + dropout(y): y holds a sublayer's output and becomes the residual stream.
void residual_dropout(const view& residual, const view* mask, float keep_scale, const view& y, std::size_t n);
// out = dropout(in) (mask 1: in * keep_scale, mask 0: 0; no mask: in). out may be in.
void dropout_apply(const view& in, const view* mask, float keep_scale, const view& out, std::size_t n);
void convert(const view& in, const view& out, std::size_t n);  // out = in in out's dtype
void fill(const view& out, float value, std::size_t n);
// dst += src, then src = 0 (folding a micro-batch's 16-bit gradients into an fp32 accumulator).
void accumulate_and_clear(const view& dst, const view& src, std::size_t n);

}  // namespace trainplan::kernels
