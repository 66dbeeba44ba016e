// Model-state bytes (weights, master copy, gradients, optimizer state) per precision regime and
// optimizer, read from the inventory: the seeds' bytes-per-parameter figures must follow from the layout.
#include <catch2/catch.hpp>

#include "planner/profiles/registry.hpp"
#include "planner/util/input_error.hpp"
#include "planner/memory/inventory.hpp"
#include "planner/model/param_count.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using namespace trainplan::test;

namespace {

std::uint64_t state_bytes(const model_spec& m, precision_regime p, grad_dtype_choice g, optimizer_kind o) {
  run_config r;
  r.seq = 16;
  r.precision = p;
  r.grad_dtype = g;
  r.optimizer = o;
  const inventory inv = build_inventory(m, r, make_precision_layout(p, g));
  std::uint64_t bytes = 0;
  for (const tensor_spec& t : inv.tensors)
    if (t.lifetime != state_lifetime::micro_batch && t.role != tensor_role::data) bytes += t.bytes;  // not the loss's
  return bytes;
}

}  // namespace

TEST_CASE("the Ultra-scale Playbook table: 16 and 20 bytes per parameter", "[model-state][seed]") {
  // Seed 001, "Memory for weights/grads/optimizer states": 1B 16/20 GB, 7B 112/140, 70B 1120/1400,
  // 405B 6480/8100 (GB = 1e9 bytes): bf16-mixed with Adam, without and with fp32 gradient accumulation.
  struct row {
    const char* preset;
    std::uint64_t nominal;
    std::uint64_t gb_16, gb_20;
  };
  const row table[] = {{"tinyllama-1.1b", 1'000'000'000ull, 16, 20},
                       {"llama-2-7b", 7'000'000'000ull, 112, 140},
                       {"llama-2-70b", 70'000'000'000ull, 1120, 1400},
                       {"llama-3.1-405b", 405'000'000'000ull, 6480, 8100}};
  for (const row& r : table) {
    INFO(r.preset);
    const model_spec& m = data().model(r.preset).spec;
    const std::uint64_t P = count_params(m).total;
    const std::uint64_t b16 = state_bytes(m, precision_regime::bf16_mixed, grad_dtype_choice::automatic, optimizer_kind::adamw);
    const std::uint64_t b20 = state_bytes(m, precision_regime::bf16_mixed, grad_dtype_choice::fp32, optimizer_kind::adamw);
    CHECK(b16 == 16 * P);
    CHECK(b20 == 20 * P);
    CHECK((b16 / P) * r.nominal == r.gb_16 * 1'000'000'000ull);
    CHECK((b20 / P) * r.nominal == r.gb_20 * 1'000'000'000ull);
    // Full fp32 training lands on the same 16 bytes: mixed precision redistributes, it does not save.
    CHECK(state_bytes(m, precision_regime::fp32, grad_dtype_choice::automatic, optimizer_kind::adamw) == 16 * P);
  }
}

TEST_CASE("other regimes: pure bf16 8, Megatron 18, autocast 16, fp16-mixed 16 bytes/param", "[model-state]") {
  const model_spec& m = data().model("gpt2").spec;
  // What the default profile (trainplan) stores: GPT-2's vocabulary padded to 50304 rows as llm.c's.
  const std::uint64_t P = count_params(with_vocab_rows(m, vocab_rows(m, 128))).total;
  auto bpp = [&](precision_regime p) { return state_bytes(m, p, grad_dtype_choice::automatic, optimizer_kind::adamw); };
  CHECK(bpp(precision_regime::bf16) == 8 * P);           // bf16 weights, grads, m, v
  CHECK(bpp(precision_regime::megatron_bf16) == 18 * P); // 2 + 4 (main_grad) + 4 (master) + 8
  CHECK(bpp(precision_regime::amp_bf16) == 16 * P);      // fp32 weights + grads + Adam; casts are activations
  CHECK(bpp(precision_regime::fp16_mixed) == 16 * P);
  // fp8 adds two one-byte copies of the GEMM weights (the tied head is not one of them).
  const std::uint64_t gemm = count_params(m).matmul_per_layer * m.layers;
  CHECK(bpp(precision_regime::fp8_mixed) == 16 * P + 2 * gemm);
}

TEST_CASE("option --grad-dtype fp32 adds a buffer only where gradients are 16-bit", "[model-state]") {
  const model_spec& m = data().model("gpt2").spec;
  const std::uint64_t P = count_params(with_vocab_rows(m, vocab_rows(m, 128))).total;  // padded vocabulary
  CHECK(state_bytes(m, precision_regime::fp32, grad_dtype_choice::fp32, optimizer_kind::adamw) == 16 * P);
  CHECK(state_bytes(m, precision_regime::megatron_bf16, grad_dtype_choice::fp32, optimizer_kind::adamw) == 18 * P);
  CHECK(state_bytes(m, precision_regime::bf16, grad_dtype_choice::fp32, optimizer_kind::adamw) == 12 * P);
  CHECK_THROWS_AS(make_precision_layout(precision_regime::fp32, grad_dtype_choice::bf16), input_error);
}

TEST_CASE("optimizer state per parameter", "[model-state][optimizer]") {
  const model_spec& m = data().model("llama-2-7b").spec;
  const param_counts pc = count_params(m);
  const std::uint64_t P = pc.total;
  auto opt = [&](optimizer_kind o) {
    return state_bytes(m, precision_regime::bf16_mixed, grad_dtype_choice::automatic, o) - 8 * P;  // minus weights+master+grads
  };
  CHECK(opt(optimizer_kind::adamw) == 8 * P);
  CHECK(opt(optimizer_kind::sgd) == 0);
  CHECK(opt(optimizer_kind::sgd_momentum) == 4 * P);
  CHECK(opt(optimizer_kind::lion) == 4 * P);
  // 8-bit Adam: two 1-byte states plus one fp32 scale per 2048 elements; every llama-2-7b tensor except
  // the 4096-element norm weights is large enough to be quantized.
  const std::uint64_t small = m.hidden * (2 * m.layers + 1);  // RMSNorm weights, kept in fp32
  const std::uint64_t big = P - small;
  const std::uint64_t adam8 = opt(optimizer_kind::adamw_8bit);
  CHECK(adam8 > 2 * big);
  CHECK(adam8 < 2 * big + 2 * (big / 2048 + 1000) * 4 + 2 * 4 * small + 1);
  CHECK(adam8 == Approx(2.0 * P).epsilon(0.01));
  // Adafactor: rows + columns per matrix (here [out, in]: out + in values), full vectors for norms.
  const std::uint64_t h = 4096, f = 11008, V = 32000, L = 32;
  const std::uint64_t per_layer = (3 * h + h) + (h + h) + 2 * (f + h) + (h + f) + 2 * h;
  CHECK(opt(optimizer_kind::adafactor) == 4 * (L * per_layer + 2 * (V + h) + h));
}
