// The CPU references of the pointwise ops between the big kernels (elementwise.hpp): the residual add through
// dropout, dropout alone, dtype conversion, fills and accumulation.
#include "kernels/elementwise.hpp"

namespace trainplan::kernels {

void residual_dropout(const view& residual, const view* mask, float keep_scale, const view& y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    float v = y.get(i);
    if (mask) v = mask->get(i) != 0.0f ? v * keep_scale : 0.0f;
    y.set(i, residual.get(i) + v);
  }
}

void dropout_apply(const view& in, const view* mask, float keep_scale, const view& out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    out.set(i, mask ? (mask->get(i) != 0.0f ? in.get(i) * keep_scale : 0.0f) : in.get(i));
}

void convert(const view& in, const view& out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out.set(i, in.get(i));
}

void fill(const view& out, float value, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out.set(i, value);
}

void accumulate_and_clear(const view& dst, const view& src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    dst.set(i, dst.get(i) + src.get(i));
    src.set(i, 0.0f);
  }
}

}  // namespace trainplan::kernels
