// The losses that never build the whole logits under --framework hf (planner/profiles/hf/hf_head_ops.cpp):
// torchtune's chunked output with CEWithChunkedOutputLoss and Liger's fused linear cross-entropy, checked
// against the bytes derived by hand from their sources (torchtune/modules/loss/ce_chunked_output_loss.py and
// the recipes' `del logits`; liger_kernel/ops/fused_linear_cross_entropy.py). Llama-3.2-3B as torchtune's
// published run: bf16 weights, seq 4096, micro-batch 2 (V = 128,256, h = 3,072, 8,192 tokens).
#include <catch2/catch.hpp>

#include "planner/memory/timeline.hpp"
#include "planner/profiles/registry.hpp"
#include "tests/support/plan_helpers.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;

namespace {

constexpr std::uint64_t V = 128256, h = 3072, T = 2 * 4096;

model_spec llama_3b() {
  const model_spec& m = test::data().model("llama-3.2-3b").spec;
  REQUIRE(m.vocab == V);
  REQUIRE(m.hidden == h);
  return m;
}

run_config torchtune_run(loss_kind loss, precision_regime p = precision_regime::bf16) {
  run_config r = test::run_of(4096, 2, recompute_mode::full, attention_kind::flash, 0.0);
  r.profile = &profile_named("hf");
  r.precision = p;
  r.loss = loss;
  return r;
}

// The bytes of the logits-and-loss buffers the peak timeline counts at `event` (loss: L + 2, the head's
// backward: L + 3).
std::uint64_t logits_bytes_at(const inventory& inv, std::int64_t event) {
  std::uint64_t sum = 0;
  for (const tensor_spec& t : inv.tensors)
    if (t.category == tensor_category::logits && !t.momentary) sum += instances_live(t, event) * t.bytes;
  return sum;
}

std::size_t rows_named(const inventory& inv, std::string_view name) {
  std::size_t n = 0;
  for (const tensor_spec& t : inv.tensors) n += t.name == name;
  return n;
}

}  // namespace

TEST_CASE("the standard loss keeps the bf16 logits, fp32 log-probabilities and two fp32 gradients", "[unit][hf][loss]") {
  const model_spec m = llama_3b();
  const inventory inv = test::inventory_of(m, torchtune_run(loss_kind::standard));
  const std::int64_t bwd_head = static_cast<std::int64_t>(m.layers) + 3;
  // logits [T, V] bf16, log_softmax's fp32 output, nll_loss's and log_softmax's fp32 gradients, the labels.
  CHECK(logits_bytes_at(inv, bwd_head) == T * V * 2 + 3 * T * V * 4 + T * 8);
  CHECK(logits_bytes_at(inv, bwd_head) == 14'709'489'664);
}

TEST_CASE("torchtune's chunked loss upcasts one chunk at a time and frees the logits before backward", "[unit][hf][loss]") {
  const model_spec m = llama_3b();
  const inventory inv = test::inventory_of(m, torchtune_run(loss_kind::chunked));
  const std::int64_t loss = static_cast<std::int64_t>(m.layers) + 2, bwd_head = loss + 1;
  // 8 chunks of 512 positions x 2 sequences = 1,024 rows each (tensor_split of 4,096 into 8).
  const std::uint64_t rows = T / 8;
  CHECK(rows_named(inv, "logits.chunk") == 8);
  CHECK(rows_named(inv, "loss.log_probs") == 8);
  CHECK(test::tensor_named(inv, "logits") == nullptr);
  // At the loss: every chunk's bf16 logits, one chunk's fp32 copy, every chunk's fp32 log-probabilities, labels.
  CHECK(logits_bytes_at(inv, loss) == 8 * rows * V * 2 + rows * V * 4 + 8 * rows * V * 4 + T * 8);
  CHECK(logits_bytes_at(inv, loss) == 6'829'441'024);
  // In the head's backward: the saved log-probabilities, one chunk's two fp32 gradients, one chunk's
  // zero-filled [b, s, h] bf16 input gradient; the logits are gone (`del logits`).
  CHECK(logits_bytes_at(inv, bwd_head) == 8 * rows * V * 4 + T * 8 + 2 * rows * V * 4 + T * h * 2);
  CHECK(logits_bytes_at(inv, bwd_head) == 5'303'762'944);
}

TEST_CASE("the chunked loss splits the sequence into --loss-chunks as tensor_split does", "[unit][hf][loss]") {
  const model_spec m = llama_3b();
  run_config r = torchtune_run(loss_kind::chunked);
  r.seq = 4097, r.loss_chunks = 4;
  const inventory inv = test::inventory_of(m, r);
  // 4,097 = 1,025 + 3 x 1,024: the first chunk one position longer; two sequences each.
  std::vector<std::uint64_t> chunk_rows;
  for (const tensor_spec& t : inv.tensors)
    if (t.name == "loss.log_probs") chunk_rows.push_back(t.shape.to_vector()[0]);
  CHECK(chunk_rows == std::vector<std::uint64_t>{2050, 2048, 2048, 2048});
  // The transient buffers are the largest chunk's.
  CHECK(test::tensor_named(inv, "loss.logits_fp32")->shape.to_vector() == std::vector<std::uint64_t>{2050, V});
}

TEST_CASE("Liger's fused linear loss keeps no logits and its gradients from the forward", "[unit][hf][loss]") {
  const model_spec m = llama_3b();
  const std::int64_t loss = static_cast<std::int64_t>(m.layers) + 2, bwd_head = loss + 1;
  // Liger's chunk: inc_factor = cdiv(128256, 3072) = 42, chunk_size = next_power_of_2(cdiv(8192, 42) = 196) = 256.
  const std::uint64_t chunk = 256;
  SECTION("bf16 weights: the torch.mm(out=) path, one logits buffer for every chunk") {
    const inventory inv = test::inventory_of(m, torchtune_run(loss_kind::fused_linear));
    CHECK(test::tensor_named(inv, "logits") == nullptr);
    CHECK(test::tensor_named(inv, "loss.log_probs") == nullptr);
    CHECK(test::tensor_named(inv, "loss.logits_chunk")->shape.to_vector() == std::vector<std::uint64_t>{chunk, V});
    CHECK(test::tensor_named(inv, "loss.grad_input_chunk") == nullptr);
    // grad_input [T, h] and grad_weight [V, h] in bf16, loss_1d [T] fp32, one chunk's logits.
    CHECK(logits_bytes_at(inv, loss) == T * h * 2 + V * h * 2 + T * 4 + chunk * V * 2);
    CHECK(logits_bytes_at(inv, loss) == 904'036'352);
    // In backward only grad_input is left (grad_weight is the head's gradient from here: the model state's).
    CHECK(logits_bytes_at(inv, bwd_head) == T * h * 2);
  }
  SECTION("under autocast: fp32 gradients, and each chunk's casts and products are new tensors") {
    const inventory inv = test::inventory_of(m, torchtune_run(loss_kind::fused_linear, precision_regime::amp_bf16));
    CHECK(test::tensor_named(inv, "loss.grad_weight")->type == dtype::fp32);
    CHECK(test::tensor_named(inv, "loss.grad_input")->type == dtype::fp32);
    CHECK(logits_bytes_at(inv, loss) == T * h * 4 + V * h * 4 + T * 4 + chunk * h * 2 + chunk * V * 2 + chunk * h * 2);
    // autocast's bf16 copy of the head, made by the first chunk's GEMM and dropped after the loss.
    const tensor_spec* cast = test::tensor_named(inv, "lm_head.autocast.weight");
    REQUIRE(cast != nullptr);
    CHECK(instances_live(*cast, loss) == 1);
    CHECK(instances_live(*cast, bwd_head) == 0);
  }
}

TEST_CASE("the fused linear loss runs the head's three GEMMs in the forward", "[unit][hf][loss]") {
  const model_spec m = llama_3b();
  const plan_result standard = test::plan_of(m, torchtune_run(loss_kind::standard));
  const plan_result fused = test::plan_of(m, torchtune_run(loss_kind::fused_linear));
  // The same FLOPs for the step (2 T V h forward, 4 T V h backward), only moved.
  CHECK(fused.flops.hardware_per_step == standard.flops.hardware_per_step);
  double gemm_flops = 0;
  for (const auto& op : fused.ops.ops)
    if (op.name == "loss.fused_linear.gemms") gemm_flops += op.flops;
  CHECK(gemm_flops == Approx(3.0 * 2 * T * V * h).epsilon(1e-12));
  // and the standard loss's lm_head op is gone
  for (const auto& op : fused.ops.ops) CHECK(op.name != "lm_head");
}

TEST_CASE("the chunked losses fit where the standard one peaks on the logits", "[unit][hf][loss]") {
  // torchtune's Llama-3.2-3B with full activation checkpointing and fused AdamW (no foreach temporary at the
  // optimizer step): the standard loss's [T, V] buffers are most of the difference from its measured 24.9 GiB
  // (which also has torch.compile, not modelled).
  const model_spec m = llama_3b();
  auto peak = [&](loss_kind loss) {
    run_config r = torchtune_run(loss);
    r.optimizer_impl = optimizer_impl_kind::fused;
    return test::plan_of(m, r).tensor_peak_bytes;
  };
  const std::uint64_t standard = peak(loss_kind::standard), chunked = peak(loss_kind::chunked),
                      fused = peak(loss_kind::fused_linear);
  CHECK(chunked < standard);
  CHECK(fused < chunked);
  // At least one fp32 [T, V] buffer fewer at the peak.
  CHECK(standard - chunked > T * V * 4);
}
