// DeepSpeed ZeRO's per-rank memory (planner/profiles/deepspeed/) against hand derivations from its optimizers'
// code and the formulas it implies (ZeRO-1 4P + 14P/N at the end of backward, ZeRO-2 2P + 14P/N, ZeRO-3 16P/N),
// for Llama-2-7B (P = 6,738,415,616; h = 4096; one layer 202,383,360; the head 131,072,000).
#include <catch2/catch.hpp>

#include "planner/evaluate/plan.hpp"
#include "planner/profiles/deepspeed/deepspeed_state.hpp"
#include "planner/profiles/registry.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;

namespace {

constexpr std::uint64_t P = 6'738'415'616ull, h = 4096, layer = 202'383'360ull, head = 131'072'000ull;

inventory inventory_of(int zero, std::uint64_t gpus) {
  run_config r = test::run_of(4096, 1, recompute_mode::none, attention_kind::flash, 0.0);
  r.profile = &profile_named("deepspeed");
  r.precision = precision_regime::bf16_mixed;
  r.gpus = gpus;
  r.zero = zero;
  return build_inventory(test::data().model("llama-2-7b").spec, r, make_precision_layout(r.precision, r.grad_dtype));
}

std::uint64_t named(const inventory& inv, std::string_view name) {
  std::uint64_t b = 0;
  for (const tensor_spec& t : inv.tensors)
    if (t.name == name) b += t.bytes;
  return b;
}

}  // namespace

TEST_CASE("deepspeed: the Trainer's \"auto\" buckets for h = 4096", "[unit][deepspeed]") {
  const deepspeed_buckets b = deepspeed_buckets_for(test::data().model("llama-2-7b").spec, 3);
  CHECK(b.reduce_bucket == h * h);               // 16,777,216 elements: 32 MiB in bf16
  CHECK(b.prefetch_bucket == 15'099'494);        // 0.9 h^2, truncated
  CHECK(b.persistence == 40'960);                // 10 h: the norms' weights (4096) stay whole
  CHECK(deepspeed_buckets_for(test::data().model("llama-2-7b").spec, 1).overlap_comm == false);
}

TEST_CASE("deepspeed: ZeRO-3 keeps the last layers gathered within max_reuse_distance", "[unit][deepspeed]") {
  // After layer 31's forward the trace reaches its backward through the head's forward and backward (2 x 131M),
  // layer 30's through layer 31's forward and backward too (+ 2 x 202M = 667M), layer 29's needs 1,071M > 1e9.
  CHECK(zero3_layers_kept(32, layer, head, 1'000'000'000) == 2);
  CHECK(zero3_layers_kept(32, layer, head, 0) == 0);
  CHECK(zero3_layers_kept(4, 10, 10, 1'000'000'000) == 4);  // a small model stays gathered
}

TEST_CASE("deepspeed: model state per stage", "[unit][deepspeed]") {
  const std::uint64_t N = 8;
  // ZeRO-1 and 2: the flat bf16 parameters (P rounded up to a multiple of 2N), an fp32 master partition and
  // AdamW's two fp32 moments over it, the partition's bf16 gradients.
  for (int stage : {1, 2}) {
    INFO("stage " << stage);
    const inventory inv = inventory_of(stage, N);
    CHECK(named(inv, "deepspeed.params") == 2 * ((P + 15) / 16 * 16));
    CHECK(named(inv, "deepspeed.master") == 4 * P / N);
    CHECK(named(inv, "adam.m") + named(inv, "adam.v") == 8 * P / N);
    CHECK(named(inv, "deepspeed.grads_in_partition") == 2 * P / N);
  }
  // Stage 1 keeps every full bf16 gradient until the boundary: a layer's, the head's, the embedding's (2P in all).
  const inventory z1 = inventory_of(1, N);
  CHECK(32 * named(z1, "layer{}.grads") + named(z1, "grads.head") + named(z1, "grads.embedding") == 2 * P);
  CHECK(named(z1, "deepspeed.ipg_buckets") == 2 * h * h);      // one bucket: overlap_comm off
  CHECK(named(inventory_of(2, N), "deepspeed.ipg_buckets") == 2 * 2 * h * h);  // two with overlap_comm
  // ZeRO-3: the 16-bit partition and the gradient partitions (each P/N, every tensor's count divisible by 8), the
  // fp32 master partition and the moments: 16P/N; the norms' weights stay whole.
  const inventory z3 = inventory_of(3, N);
  CHECK(named(z3, "deepspeed.params.partition") == 2 * P / N);
  CHECK(named(z3, "deepspeed.grad_partitions") == 2 * P / N);
  CHECK(named(z3, "deepspeed.master") + named(z3, "adam.m") + named(z3, "adam.v") == 12 * P / N);
  CHECK(named(z3, "deepspeed.params.persistent") == 2 * (2 * 32 + 1) * h);
}

TEST_CASE("deepspeed: ZeRO-1's full gradients name their parameters, for the op-by-op backward of a tied model", "[unit][deepspeed]") {
  // GPT-2 ties its head to the token table: grads.head holds the final norm's and the table's gradients, and the
  // allocator replay allocates them part by part as PyTorch's .grad of each (this once threw an internal error).
  run_config r = test::run_of(1024, 4, recompute_mode::none, attention_kind::flash, 0.0);
  r.profile = &profile_named("deepspeed");
  r.precision = precision_regime::bf16_mixed;
  r.gpus = 8;
  r.zero = 1;
  const gpu_spec& h100 = test::data().gpu("h100");
  const plan_result p = evaluate_plan(test::data().model("gpt2").spec, r, h100, test::data().calibration_for(h100));
  CHECK(p.allocator.has_value());
  CHECK(p.fits);
}
