// The optimizers' state per trainable tensor (planner/run/optimizer.hpp), on hand-made tensor lists whose
// bytes are counted by hand from each optimizer's definition: AdamW keeps m and v (Loshchilov & Hutter 2019),
// SGD with momentum and Lion one buffer (Chen et al. 2023), Adafactor a factored second moment of rows + columns
// per matrix (Shazeer & Stern 2018), bitsandbytes' 8-bit AdamW one byte per element and an fp32 absmax per
// 2048-element block, fp32 below 4096 elements (Dettmers et al. 2022; bitsandbytes' min_8bit_size).
#include <catch2/catch.hpp>

#include <cstdint>
#include <string_view>
#include <vector>

#include "planner/run/optimizer.hpp"
#include "planner/util/input_error.hpp"

using namespace trainplan;

namespace {

param_tensor tensor(std::vector<std::uint64_t> shape, bool per_layer, layer_set in_layers = layer_set::all) {
  param_tensor p;
  p.shape = shape;
  p.count = 1;
  for (std::uint64_t d : shape) p.count *= d;
  p.per_layer = per_layer;
  p.in_layers = in_layers;
  return p;
}

// A (1000, 300) matrix in each of 2 layers and a (300) vector once: 2 * 300,000 + 300 = 600,300 elements.
const std::vector<param_tensor> params = {tensor({1000, 300}, true), tensor({300}, false)};
const layer_counts two_layers(2);

}  // namespace

TEST_CASE("optimizer state: AdamW two buffers, SGD none, momentum and Lion one, each of every element", "[optimizer]") {
  const optimizer_state_buffers adamw = optimizer_state(optimizer_kind::adamw, params, two_layers, dtype::fp32);
  REQUIRE(adamw.size() == 2);
  CHECK(adamw.buffers[0].name == "adam.m");
  CHECK(adamw.buffers[1].name == "adam.v");
  for (const optimizer_state_buffer& b : adamw) {
    CHECK(b.type == dtype::fp32);
    CHECK(b.bytes == 600'300 * 4);
  }
  // In bf16 (PyTorch keeps the state in a pure-bf16 parameter's dtype): half.
  CHECK(optimizer_state(optimizer_kind::adamw, params, two_layers, dtype::bf16).buffers[0].bytes == 600'300 * 2);
  CHECK(optimizer_state(optimizer_kind::sgd, params, two_layers, dtype::fp32).size() == 0);
  const optimizer_state_buffers momentum = optimizer_state(optimizer_kind::sgd_momentum, params, two_layers, dtype::fp32);
  REQUIRE(momentum.size() == 1);
  CHECK(momentum.buffers[0].name == "sgd.momentum");
  CHECK(momentum.buffers[0].bytes == 600'300 * 4);
  const optimizer_state_buffers lion = optimizer_state(optimizer_kind::lion, params, two_layers, dtype::fp32);
  REQUIRE(lion.size() == 1);
  CHECK(lion.buffers[0].name == "lion.m");
  CHECK(lion.buffers[0].bytes == 600'300 * 4);
}

TEST_CASE("optimizer state: Adafactor keeps a matrix's row and column statistics, a vector whole", "[optimizer]") {
  // (1000, 300): 1000 row + 300 column statistics, in each of 2 layers; the (300) vector keeps 300. In fp32:
  // (2 * 1300 + 300) * 4 = 11,600 bytes.
  const optimizer_state_buffers s = optimizer_state(optimizer_kind::adafactor, params, two_layers, dtype::fp32);
  REQUIRE(s.size() == 1);
  CHECK(s.buffers[0].name == "adafactor.v");
  CHECK(s.buffers[0].bytes == (2 * 1300 + 300) * 4);
  // A stack of 4 expert matrices (4, 10, 20) factors over its last two dimensions: 4 * 10 rows + 4 * 20
  // columns = 120 values.
  const std::vector<param_tensor> experts = {tensor({4, 10, 20}, false)};
  CHECK(optimizer_state(optimizer_kind::adafactor, experts, layer_counts(1), dtype::fp32).buffers[0].bytes == 120 * 4);
}

TEST_CASE("optimizer state: 8-bit AdamW is a byte per element plus a 4-byte absmax per 2048, fp32 for small tensors", "[optimizer]") {
  // The matrix: 300,000 elements in ceil(300,000 / 2048) = 147 blocks: 300,000 + 147 * 4 = 300,588 bytes, in each
  // of 2 layers. The vector: 300 < 4096 elements, kept in fp32: 1,200 bytes. Each of m and v: 602,376 bytes.
  const optimizer_state_buffers s = optimizer_state(optimizer_kind::adamw_8bit, params, two_layers, dtype::fp32);
  REQUIRE(s.size() == 2);
  CHECK(s.buffers[0].name == "adam8bit.m");
  CHECK(s.buffers[1].name == "adam8bit.v");
  for (const optimizer_state_buffer& b : s) {
    CHECK(b.type == dtype::u8);
    CHECK(b.bytes == 2 * 300'588 + 1'200);
  }
  // At the bound: 4096 elements are quantized (2 blocks: 4096 + 8 bytes), 4095 are not (4095 * 4).
  CHECK(optimizer_state(optimizer_kind::adamw_8bit, {tensor({4096}, false)}, layer_counts(1), dtype::fp32).buffers[0].bytes == 4104);
  CHECK(optimizer_state(optimizer_kind::adamw_8bit, {tensor({4095}, false)}, layer_counts(1), dtype::fp32).buffers[0].bytes == 16380);
}

TEST_CASE("optimizer state: a per-layer tensor counts the layers that hold it", "[optimizer]") {
  // 10 layers of which the first 3 are dense: a tensor of the MoE layers is held 7 times, of the dense ones 3.
  const layer_counts mixed(10, 3);
  const std::vector<param_tensor> moe = {tensor({100}, true, layer_set::moe)}, dense = {tensor({100}, true, layer_set::dense)};
  CHECK(optimizer_state(optimizer_kind::lion, moe, mixed, dtype::fp32).buffers[0].bytes == 7 * 100 * 4);
  CHECK(optimizer_state(optimizer_kind::lion, dense, mixed, dtype::fp32).buffers[0].bytes == 3 * 100 * 4);
}

TEST_CASE("optimizer state: each buffer is read and written once a step", "[optimizer][time]") {
  CHECK(optimizer_state_traffic_bytes(optimizer_state(optimizer_kind::adamw, params, two_layers, dtype::fp32)) ==
        2 * 2 * 600'300 * 4);
  CHECK(optimizer_state_traffic_bytes(optimizer_state(optimizer_kind::sgd, params, two_layers, dtype::fp32)) == 0);
}

TEST_CASE("optimizer state: more than 64 bits of state is an input error, not a wrapped count", "[optimizer][errors]") {
  // 2^62 elements of 4 bytes: 2^64 bytes.
  const std::vector<param_tensor> huge = {tensor({1ull << 31, 1ull << 31}, false)};
  CHECK_THROWS_WITH(optimizer_state(optimizer_kind::adamw, huge, layer_counts(1), dtype::fp32),
                    Catch::Contains("larger than 64 bits"));
}

TEST_CASE("optimizer names parse in any case, with a suggestion for a slip", "[optimizer][names]") {
  for (optimizer_kind o : {optimizer_kind::adamw, optimizer_kind::sgd, optimizer_kind::sgd_momentum, optimizer_kind::adafactor,
                           optimizer_kind::adamw_8bit, optimizer_kind::lion}) {
    INFO(optimizer_name(o));
    CHECK(parse_optimizer(optimizer_name(o)) == o);
  }
  CHECK(parse_optimizer("AdamW-8bit") == optimizer_kind::adamw_8bit);
  // "adam": d = 1 from adamw (3 <= 5).
  CHECK_THROWS_WITH(parse_optimizer("adam"), Catch::StartsWith("--optimizer: unknown optimizer 'adam'") &&
                                                 Catch::EndsWith("did you mean 'adamw'?"));
  CHECK(parse_optimizer_impl("Fused") == optimizer_impl_kind::fused);
  CHECK(optimizer_impl_name(optimizer_impl_kind::foreach_impl) == "foreach");
  CHECK_THROWS_WITH(parse_optimizer_impl("apex"), Catch::StartsWith("--optimizer-impl: unknown implementation 'apex' (known: foreach, fused)"));
}
