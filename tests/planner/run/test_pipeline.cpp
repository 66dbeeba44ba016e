// Pipeline parallelism (planner/run/pipeline.hpp): what each pipeline GPU holds of the model state, how many
// micro-batches' activations it keeps under 1F1B and interleaved 1F1B, and the bubble, each against a
// derivation by hand from the papers and Megatron-Core's schedule.
#include <catch2/catch.hpp>

#include "planner/model/model_facts.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/util/input_error.hpp"
#include "planner/run/pipeline.hpp"
#include "planner/evaluate/plan.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using namespace trainplan::test;

namespace {

std::uint64_t bytes_named(const inventory& inv, std::string_view name) {
  std::uint64_t b = 0;
  for (const tensor_spec& t : inv.tensors)
    if (t.name == name) b += t.bytes * t.instances();
  return b;
}

plan_result plan_of(const model_spec& m, const run_config& r) {
  const gpu_spec& g = data().gpu("h100");
  return evaluate_plan(m, r, g, data().calibration_for(g));
}

// Llama-2-7B's parameters by hand (its config.json: h 4096, 32 heads of 128, ffn 11008, V 32000, untied):
// a layer holds q, k, v, o (4 h^2), gate, up, down (3 h f) and two RMSNorm weights (2 h).
constexpr std::uint64_t h7 = 4096, f7 = 11008, V7 = 32000;
constexpr std::uint64_t layer7 = 4 * h7 * h7 + 3 * h7 * f7 + 2 * h7;  // 202,383,360
constexpr std::uint64_t table7 = V7 * h7;                            // 131,072,000

}  // namespace

TEST_CASE("each pipeline stage holds its own layers' weights, gradients and Adam state", "[pipeline][memory]") {
  static_assert(layer7 == 202'383'360);
  const model_spec& m = data().model("llama-2-7b").spec;
  run_config r = megatron_run(4096);
  r.gpus = r.pp = 2;
  r.grad_accum = 8;
  // Megatron's bf16 regime: bf16 weights, fp32 gradients, fp32 master weights, fp32 Adam m and v.
  const std::uint64_t first = 16 * layer7 + table7;            // embedding and layers 0-15
  const std::uint64_t last = 16 * layer7 + h7 + table7;        // layers 16-31, the final norm and the head
  for (std::uint64_t rank : {0ull, 1ull}) {
    INFO("rank " << rank);
    const bool is_first = rank == 0, is_last = rank == 1;
    const model_spec stage = pipeline_stage_model(m, rank, 2, 1);
    CHECK(stage.layers == 16);
    const model_facts facts = pipeline_stage_facts(stage, is_first, is_last);
    const inventory inv = build_inventory(stage, r, make_precision_layout(r.precision, r.grad_dtype), &facts,
                                          {is_first, is_last, 2 - rank, 2 - rank});
    const std::uint64_t P = is_first ? first : last;
    CHECK(bytes_named(inv, "weights.bf16") == 2 * P);
    CHECK(bytes_named(inv, "grads.fp32") == 4 * P);
    CHECK(bytes_named(inv, "master.fp32") == 4 * P);
    CHECK(bytes_named(inv, "adam.m") == 4 * P);
    CHECK(bytes_named(inv, "adam.v") == 4 * P);
  }
  // The plan reports the worst stage's: with 2 micro-batches in flight the first (26.95 GB of Adam state),
  // not the vocabulary table's share alone (1 GB: the state of the stage's layers once went missing).
  const plan_result p = plan_of(m, r);
  CHECK_THAT(p.pipeline_stage, Catch::StartsWith("first of 2"));
  CHECK(p.category_bytes(tensor_category::optimizer) == 8 * first);
  CHECK(p.category_bytes(tensor_category::gradients) == 4 * first);
}

TEST_CASE("tensor and pipeline parallelism together: 70B on TP 8 x PP 4 holds a 32nd of the layers' state",
          "[pipeline][memory]") {
  // Llama-2-70B by hand: h 8192, 64 heads, 8 kv heads of 128 (k and v 1024 wide), ffn 28672, V 32000.
  const std::uint64_t h = 8192, kv = 1024, f = 28672, V = 32000;
  const std::uint64_t layer = 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h;  // 855,654,400
  const model_spec& m = data().model("llama-2-70b").spec;
  run_config r = megatron_run(4096);
  r.gpus = 32, r.tp = 8, r.pp = 4, r.grad_accum = 16;
  r.recompute = recompute_mode::full;
  const plan_result p = plan_of(m, r);
  CHECK_THAT(p.pipeline_stage, Catch::StartsWith("first of 4"));
  const std::uint64_t first = (20 * layer + V * h) / 8;  // every tensor of the stage split 8 ways
  CHECK(p.category_bytes(tensor_category::optimizer) == 8 * first);  // Adam m and v in fp32: 16.18 GiB
  CHECK(p.category_bytes(tensor_category::master_weights) == 4 * first);
}

TEST_CASE("1F1B keeps p - r micro-batches in flight on rank r, interleaving p v + p - 1 - 2r chunks",
          "[pipeline][schedule]") {
  // Megatron-Core's warm-up counts (schedules.py, get_pp_rank_microbatches), plus the forward before each
  // backward, capped by the step's chunk forwards.
  CHECK(pipeline_chunks_in_flight(0, 4, 1, 16) == 4);
  CHECK(pipeline_chunks_in_flight(3, 4, 1, 16) == 1);
  CHECK(pipeline_chunks_in_flight(0, 4, 1, 2) == 2);      // fewer micro-batches than stages
  CHECK(pipeline_chunks_in_flight(0, 4, 2, 8) == 11);     // 2 x 3 + 1 x 4 + 1
  CHECK(pipeline_chunks_in_flight(3, 4, 2, 8) == 5);      // 0 + 4 + 1
  CHECK(pipeline_chunks_in_flight(0, 8, 4, 16) == 8 * 4 + 8 - 1);
  CHECK(pipeline_chunks_in_flight(0, 8, 4, 8) == 32);     // capped: 8 micro-batches x 4 chunks
  CHECK(pipeline_chunks_in_flight(0, 4, 2, 4) == 8);      // the whole step's chunk forwards
  // Korthikanti et al. 2022, Sec. 4.2.3: the first stage of an interleaved schedule stores
  // L (1 + (p - 1)/(p v)) layers' activations: chunks x L/(p v) layers.
  for (std::uint64_t p : {2ull, 4ull, 8ull})
    for (std::uint64_t v : {2ull, 3ull, 4ull}) {
      const std::uint64_t L = 96;  // divisible by every p v above
      const double layers = static_cast<double>(pipeline_chunks_in_flight(0, p, v, 64) * (L / (p * v)));
      CHECK(layers == Approx(L * (1.0 + static_cast<double>(p - 1) / static_cast<double>(p * v))));
    }
  // Of rank 0's 11 chunk forwards above, chunk 0's: micro-batches 0-3, then (after chunk 1's 0-3) 4-6.
  CHECK(pipeline_first_chunk_in_flight(11, 4, 2) == 7);
  CHECK(pipeline_first_chunk_in_flight(4, 4, 1) == 4);
}

TEST_CASE("the first stage's activations: p micro-batches of its layers, more when interleaved", "[pipeline][memory]") {
  // Megatron with flash attention keeps, per Llama layer (bf16; the norm inputs, the QKV and MLP GEMM
  // inputs, q k v, the attention output, gate, up and silu(gate) * up, the fp32 log-sum-exp per head and row):
  // 2sb (8h + 3f) + 4abs bytes. At s 4096, b 1: 539,492,352.
  const std::uint64_t s = 4096, a = 32;
  const std::uint64_t per_layer = 2 * s * (8 * h7 + 3 * f7) + 4 * a * s;
  const model_spec& m = data().model("llama-2-7b").spec;
  run_config r = megatron_run(4096);
  r.gpus = r.pp = 4;
  r.grad_accum = 8;
  const plan_result plain = plan_of(m, r);  // 4 micro-batches x 8 layers
  CHECK_THAT(plain.pipeline_stage, Catch::StartsWith("first of 4"));
  CHECK(plain.inv.activations_all_layers_bytes == 4 * 8 * per_layer);
  r.vpp = 2;  // 11 chunk forwards of 4 layers: 1 + 3/8 times as much
  const plan_result interleaved = plan_of(m, r);
  CHECK_THAT(interleaved.pipeline_stage, Catch::Contains("11 chunk forwards of 4 layers"));
  CHECK(interleaved.inv.activations_all_layers_bytes == 11 * 4 * per_layer);
  // The model state is the same 8 layers and the embedding either way.
  CHECK(interleaved.category_bytes(tensor_category::optimizer) == plain.category_bytes(tensor_category::optimizer));
  CHECK(interleaved.category_bytes(tensor_category::optimizer) == 8 * (8 * layer7 + table7));
}

TEST_CASE("the bubble is (p - 1) / (v m) of the step", "[pipeline][time]") {
  // Narayanan et al. 2021, Sec. 2.2.1 and 2.2.2.
  CHECK(pipeline_bubble_fraction(1, 1, 8) == 0.0);
  CHECK(pipeline_bubble_fraction(4, 1, 8) == Approx(3.0 / 8));
  CHECK(pipeline_bubble_fraction(4, 2, 8) == Approx(3.0 / 16));
  const model_spec& m = data().model("llama-2-7b").spec;
  run_config r = megatron_run(4096);
  r.gpus = r.pp = 4, r.vpp = 2, r.grad_accum = 8;
  const plan_result p = plan_of(m, r);
  CHECK(p.time.compute_seconds == Approx((p.time.breakdown.total() - p.time.optimizer_seconds) * (1 + 3.0 / 16)));
}

TEST_CASE("interleaving is refused where Megatron refuses it or the chunks are uneven", "[pipeline][input]") {
  const model_spec& m = data().model("llama-2-7b").spec;  // 32 layers
  run_config r = megatron_run(4096);
  r.gpus = r.pp = 4, r.grad_accum = 8;
  r.vpp = 3;  // 4 x 3 does not divide 32
  CHECK_THROWS_WITH(plan_of(m, r), Catch::Contains("--pp 4 x --vpp 3 must divide the 32 layers"));
  r.vpp = 2, r.grad_accum = 6;  // micro-batches run in groups of p = 4
  CHECK_THROWS_WITH(plan_of(m, r), Catch::Contains("multiple of 4"));
  r.pp = 1, r.gpus = 1, r.grad_accum = 8;
  CHECK_THROWS_WITH(plan_of(m, r), Catch::Contains("needs --pp of at least 2"));
  r.vpp = 0;
  CHECK_THROWS_AS(plan_of(m, r), input_error);
}
