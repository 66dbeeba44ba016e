// FSDP2's per-rank memory (planner/profiles/fsdp2/) against hand derivations from PyTorch's fully_shard code, for
// Llama-2-7B (P = 6,738,415,616; one layer 202,383,360 parameters; the embedding and the head 131,072,000 each;
// every first dimension divides by 8, so the shards need no padding).
#include <catch2/catch.hpp>

#include "planner/memory/timeline.hpp"
#include "planner/profiles/fsdp2/fsdp2_state.hpp"
#include "planner/profiles/registry.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;

namespace {

constexpr std::uint64_t P = 6'738'415'616ull, layer = 202'383'360ull, table = 131'072'000ull, h = 4096;

run_config fsdp2_run(std::uint64_t gpus) {
  run_config r = test::run_of(4096, 1, recompute_mode::none, attention_kind::flash, 0.0);
  r.profile = &profile_named("fsdp2");
  r.precision = precision_regime::bf16_mixed;
  r.gpus = gpus;
  r.zero = 3;
  return r;
}

inventory inventory_of(const run_config& r) {
  return build_inventory(test::data().model("llama-2-7b").spec, r, make_precision_layout(r.precision, r.grad_dtype));
}

// The bytes of the buffers whose names start with `prefix`, live during event `e`.
std::uint64_t live(const inventory& inv, std::string_view prefix, std::int64_t e) {
  std::uint64_t bytes = 0;
  for (const tensor_spec& t : inv.tensors)
    if (std::string_view(t.name).starts_with(prefix) && t.lifetime == state_lifetime::micro_batch)
      bytes += instances_live(t, e) * t.bytes;
  return bytes;
}

std::uint64_t named(const inventory& inv, std::string_view name) {
  for (const tensor_spec& t : inv.tensors)
    if (t.name == name) return t.bytes;
  return 0;
}

}  // namespace

TEST_CASE("fsdp2: units as torchtitan wraps Llama-2-7B, shards padded per tensor", "[unit][fsdp2]") {
  const fsdp2_units u = fsdp2_unit_sizes(describe_model(test::data().model("llama-2-7b").spec), 8);
  CHECK(u.layer.elements == layer);
  CHECK(u.layer.shard_elements == layer / 8);
  CHECK(u.embedding.elements == table);
  CHECK(u.head.elements == table + h);  // the final norm and the head
  CHECK(u.shard_elements_total == P / 8);
  // 3 ranks: every tensor's rows rounded up to a multiple of 3 (4096 rows -> 1366 a rank, 11008 -> 3670).
  const fsdp2_units three = fsdp2_unit_sizes(describe_model(test::data().model("llama-2-7b").spec), 3);
  // One layer: q, k, v, o (4096 rows each), gate and up (11008 rows of 4096), down (4096 rows of 11008), two norms
  // (4096 rows of 1).
  const std::uint64_t by_hand = 4 * 1366 * 4096 + 2 * 3670 * 4096 + 1366 * 11008 + 2 * 1366;
  CHECK(three.layer.shard_elements == by_hand);
}

TEST_CASE("fsdp2: the persistent state is 16P/N (fp32 shard, fp32 gradients, AdamW's two fp32 moments)", "[unit][fsdp2]") {
  for (std::uint64_t N : {8ull, 64ull}) {
    INFO("N = " << N);
    const inventory inv = inventory_of(fsdp2_run(N));
    CHECK(named(inv, "fsdp.params.sharded") == 4 * P / N);
    CHECK(named(inv, "adam.m") == 4 * P / N);
    CHECK(named(inv, "adam.v") == 4 * P / N);
    // The sharded gradients, unit by unit: every layer's, the head unit's and the embedding's.
    const std::uint64_t grads = 32 * named(inv, "layer{}.fsdp.grads.sharded") + named(inv, "fsdp.head.grads.sharded") +
                                named(inv, "fsdp.embedding.grads.sharded");
    CHECK(grads == 4 * P / N);
  }
}

TEST_CASE("fsdp2: a layer's backward holds 10 P_layer bytes of FSDP buffers, its forward 4 P_layer", "[unit][fsdp2]") {
  // While layer j's backward runs (bf16 parameters, fp32 reduce): its unsharded parameters (2 P), its unsharded
  // gradients (2 P), the prefetched all-gather of layer j-1 (2 P) and the reduce-scatter input of layer j+1 held
  // until this layer's post-backward (4 P): 10 P bytes. Its forward: the flat all-gather output and the unsharded
  // parameters copied out of it, 4 P.
  run_config r = fsdp2_run(8);
  r.grad_dtype = grad_dtype_choice::fp32;  // torchtitan's reduce_dtype=float32
  const inventory inv = inventory_of(r);
  const std::int64_t L = 32;
  for (std::int64_t j : {1, 16, 30}) {
    INFO("layer " << j);
    CHECK(live(inv, "layer{}.fsdp", event_index(event_kind::bwd_layer, j, L)) == (2 + 2 + 2 + 4) * layer);
    CHECK(live(inv, "layer{}.fsdp", event_index(event_kind::fwd_layer, j, L)) == 4 * layer);
  }
  // The head's unit stays gathered from its forward to its backward (reshard_after_forward=False).
  for (event_kind e : {event_kind::fwd_head, event_kind::loss, event_kind::bwd_head})
    CHECK(live(inv, "fsdp.head.unsharded_params", event_index(e, 0, L)) == 2 * (table + h));
}

TEST_CASE("PyTorch DDP under the hf profile: the Reducer's buckets are a second copy of the gradients", "[unit][ddp]") {
  // Reducer::initialize_buckets allocates a flat bucket tensor per dtype and bucket covering every parameter that
  // requires grad; with gradient_as_bucket_view=False .grad stays its own tensor: 4 bytes x P under autocast
  // (fp32 gradients), for the whole run; one GPU has no Reducer.
  run_config r = test::run_of(4096, 1, recompute_mode::none, attention_kind::flash, 0.0);
  r.profile = &profile_named("hf");
  r.precision = precision_regime::amp_bf16;
  r.gpus = 8;
  CHECK(named(inventory_of(r), "ddp.buckets") == 4 * P);
  r.gpus = 1;
  CHECK(named(inventory_of(r), "ddp.buckets") == 0);
}
