#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>

#include "planner/profiles/registry.hpp"
#include "planner/memory/inventory.hpp"
#include "planner/memory/timeline.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using namespace trainplan::test;

namespace {

struct walked {
  inventory inv;
  timeline_result tl;
};

walked walk(const model_spec& m, const run_config& r) {
  walked w;
  w.inv = build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype));
  w.tl = walk_timeline(w.inv, r.grad_accum, timeline_detail::every_event);
  return w;
}

const timeline_point& point(const timeline_result& tl, int step, std::uint64_t mb, event_kind k, std::uint64_t layer = 0) {
  auto it = std::find_if(tl.points.begin(), tl.points.end(), [&](const timeline_point& p) {
    return p.step == step && p.micro_batch == mb && p.kind == k && p.layer == layer;
  });
  REQUIRE(it != tl.points.end());
  return *it;
}

std::uint64_t bytes_named(const inventory& inv, const std::string& prefix) {
  std::uint64_t b = 0;
  for (const tensor_spec& t : inv.tensors)
    if (t.name.starts_with(prefix)) b += t.bytes;
  return b;
}

std::uint64_t bytes_exact(const inventory& inv, const std::string& name) {
  for (const tensor_spec& t : inv.tensors)
    if (t.name == name) return t.bytes;
  FAIL("no buffer named " << name);
  return 0;
}

}  // namespace

TEST_CASE("optimizer state appears at the first optimizer step, gradients live from backward to optimizer",
          "[timeline]") {
  model_spec m = gpt_shape(4, 128, 4);
  run_config r = run_of(64, 2, recompute_mode::none, attention_kind::eager, 0.0);
  walked w = walk(m, r);
  const std::uint64_t adam = bytes_named(w.inv, "adam."), grads = bytes_named(w.inv, "grads.");
  const std::uint64_t step1_fwd = point(w.tl, 1, 0, event_kind::fwd_embed).live_bytes;
  const std::uint64_t step2_fwd = point(w.tl, 2, 0, event_kind::fwd_embed).live_bytes;
  CHECK(step2_fwd - step1_fwd == adam);
  const std::uint64_t loss = point(w.tl, 2, 0, event_kind::loss).live_bytes;
  const std::uint64_t bwd_head = point(w.tl, 2, 0, event_kind::bwd_head).live_bytes;
  // From the loss to the head's backward: gradients and backward buffers appear (all but the embedding's
  // fp32 gradient, which lives in the embedding's backward only); the targets are gone (the logits, which
  // the fused classifier overwrote with their gradient, live across both).
  const std::uint64_t bwd_buffers = bytes_named(w.inv, "bwd.") - bytes_exact(w.inv, "bwd.embed_grad_fp32");
  CHECK(bwd_head - grads - bwd_buffers + bytes_exact(w.inv, "batch.targets") == loss);
  // The optimizer step: model state, and the harness's per-token losses (summed over the step, read after).
  const std::uint64_t opt1 = point(w.tl, 1, 0, event_kind::optimizer).live_bytes;
  CHECK(opt1 == bytes_named(w.inv, "weights.") + bytes_named(w.inv, "master.") + grads + adam +
                    bytes_exact(w.inv, "loss.token_losses"));
}

TEST_CASE("accumulation: activations do not persist across micro-batches, gradients do", "[timeline]") {
  model_spec m = gpt_shape(4, 128, 4);
  run_config r = run_of(64, 2, recompute_mode::none, attention_kind::flash, 0.1);
  r.grad_accum = 4;
  walked w = walk(m, r);
  const std::uint64_t grads = bytes_named(w.inv, "grads.");
  const std::uint64_t mb0 = point(w.tl, 2, 0, event_kind::fwd_embed).live_bytes;
  const std::uint64_t mb1 = point(w.tl, 2, 1, event_kind::fwd_embed).live_bytes;
  CHECK(mb1 - mb0 == grads);
  // Every event of micro-batch 1 is micro-batch 0's plus the gradients.
  for (const timeline_point& p : w.tl.points) {
    if (p.micro_batch != 1 || p.kind == event_kind::optimizer) continue;
    const timeline_point& first = point(w.tl, p.step, 0, p.kind, p.layer);
    INFO(phase_name(p));
    if (first.kind == event_kind::bwd_head || first.kind == event_kind::bwd_layer || first.kind == event_kind::bwd_embed)
      CHECK(p.live_bytes == first.live_bytes);
    else
      CHECK(p.live_bytes == first.live_bytes + grads);
  }
  // The peak is in a later micro-batch of a later step and does not grow with more accumulation.
  CHECK(w.tl.peak.step == 2);
  run_config more = r;
  more.grad_accum = 64;
  CHECK(walk(m, more).tl.peak.live_bytes == w.tl.peak.live_bytes);
}

TEST_CASE("the peak equals the sum of what is live at it, and every event is below it", "[timeline]") {
  for (recompute_mode rc : {recompute_mode::none, recompute_mode::selective, recompute_mode::full}) {
    for (attention_kind att : {attention_kind::eager, attention_kind::flash}) {
      model_spec m = gpt_shape(6, 256, 8);
      run_config r = run_of(512, 2, rc, att, 0.1);
      r.grad_accum = 3;
      walked w = walk(m, r);
      std::uint64_t sum = 0, by_category = 0;
      for (const live_tensor& t : w.tl.live_at_peak) sum += t.bytes;
      for (std::uint64_t c : w.tl.category_bytes_at_peak) by_category += c;
      CHECK(sum == w.tl.peak.live_bytes);
      CHECK(by_category == sum);
      for (const timeline_point& p : w.tl.points) CHECK(p.live_bytes <= w.tl.peak.live_bytes);
    }
  }
}

TEST_CASE("kept activations accumulate layer by layer in forward and drain in backward", "[timeline]") {
  model_spec m = gpt_shape(8, 128, 4);
  run_config r = run_of(256, 1, recompute_mode::none, attention_kind::eager, 0.0);
  walked w = walk(m, r);
  const std::uint64_t per_layer = w.inv.activations_per_layer_bytes;
  for (std::uint64_t i = 1; i < 8; ++i) {
    CHECK(point(w.tl, 2, 0, event_kind::fwd_layer, i).live_bytes - point(w.tl, 2, 0, event_kind::fwd_layer, i - 1).live_bytes ==
          per_layer);
    CHECK(point(w.tl, 2, 0, event_kind::bwd_layer, i).live_bytes - point(w.tl, 2, 0, event_kind::bwd_layer, i - 1).live_bytes ==
          per_layer);
  }
}

TEST_CASE("instances_live counts layers whose lifetime covers an event", "[timeline]") {
  model_spec m = gpt_shape(5, 64, 4);
  run_config r = run_of(32, 1, recompute_mode::none, attention_kind::eager, 0.0);
  const inventory inv = build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype));
  const std::int64_t L = 5;
  for (const tensor_spec& t : inv.tensors) {
    if (!t.per_layer) continue;
    INFO(t.name);
    const bool is_input = t.name == "layer{}.ln1.in";
    for (std::int64_t j = 0; j < L; ++j) {
      // During forward of layer j, layers 0..j hold it (and layer j+1's input already exists).
      CHECK(instances_live(t, event_index(event_kind::fwd_layer, j, L)) == std::uint64_t(j + 1 + (is_input && j + 1 < L)));
      CHECK(instances_live(t, event_index(event_kind::bwd_layer, j, L)) == std::uint64_t(j + 1));
    }
    CHECK(instances_live(t, event_index(event_kind::loss, 0, L)) == 5);
    CHECK(instances_live(t, event_index(event_kind::bwd_embed, 0, L)) == 0);
  }
}

TEST_CASE("instances_live agrees with counting layer by layer, in every profile", "[timeline]") {
  // The timeline counts the layers of an event interval in closed form, assuming steps of -1, 0 or 1:
  // checked here against the definition, instance by instance, for every buffer at every event.
  int buffers = 0;
  for (const stack_profile* fw : {&profile_named("hf"), &profile_named("trainplan"), &profile_named("megatron"), &profile_named("llmc")})
    for (model_family family : {model_family::gpt, model_family::llama})
      for (recompute_mode rc : {recompute_mode::none, recompute_mode::selective, recompute_mode::full}) {
        if (fw->name == "llmc" && family != model_family::gpt) continue;
        if (fw->name == "hf" && rc == recompute_mode::selective) continue;
        model_spec m = gpt_shape(4, 64, 4, 1000);
        if (family == model_family::llama) m.family = family, m.kv_heads = 2, m.tied_embeddings = false;
        const bool dropout = family == model_family::gpt && fw->name != "llmc";  // llm.c has none
        run_config r = run_of(32, 2, rc, attention_kind::eager, dropout ? 0.1 : 0.0);
        r.profile = fw;
        if (fw->name == "hf") r.precision = precision_regime::amp_bf16;
        const inventory inv = build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype));
        for (const tensor_spec& t : inv.tensors) {
          if (t.lifetime != state_lifetime::micro_batch) continue;
          INFO(fw->name << " " << family_name(family) << " " << recompute_name(rc) << " " << t.name);
          for (int k = 0; k < t.interval_count; ++k) {
            CHECK(std::abs(t.intervals[k].first_step) <= 1);
            CHECK(std::abs(t.intervals[k].last_step) <= 1);
          }
          for (std::int64_t e = 0; e < inv.events_per_micro_batch; ++e) {
            std::uint64_t expected = 0;
            const std::int64_t begin = t.per_layer ? t.layer_begin : 0, end = t.per_layer ? t.layer_end : 1;
            for (std::int64_t i = begin; i < end; ++i)
              for (int k = 0; k < t.interval_count; ++k) {
                const event_interval& iv = t.intervals[k];
                expected += iv.first_base + iv.first_step * i <= e && e <= iv.last_base + iv.last_step * i;
              }
            CHECK(instances_live(t, e) == expected);
          }
          ++buffers;
        }
      }
  CHECK(buffers > 100);
}

TEST_CASE("the peak-only walk finds the same first peak as the full walk", "[timeline]") {
  int cases = 0;
  for (std::uint64_t layers : {1, 2, 5})
    for (model_family family : {model_family::gpt, model_family::llama})
      for (recompute_mode rc : {recompute_mode::none, recompute_mode::selective, recompute_mode::full})
        for (attention_kind att : {attention_kind::eager, attention_kind::flash})
          for (std::uint64_t accum : {1, 3})
            for (optimizer_kind opt : {optimizer_kind::adamw, optimizer_kind::sgd, optimizer_kind::adafactor})
              for (precision_regime p : {precision_regime::bf16_mixed, precision_regime::fp32, precision_regime::amp_bf16,
                                            precision_regime::fp16_mixed})
                for (std::uint64_t seq : {16, 2048}) {
                  model_spec m = gpt_shape(layers, 256, 4, seq == 16 ? 50000 : 100);  // big vocab: logits dominate
                  if (family == model_family::llama) m.family = family, m.kv_heads = 2, m.tied_embeddings = false;
                  run_config r = run_of(seq, 2, rc, att, family == model_family::gpt ? 0.1 : 0.0);
                  r.grad_accum = accum;
                  r.optimizer = opt;
                  r.precision = p;
                  const inventory inv = build_inventory(m, r, make_precision_layout(p, r.grad_dtype));
                  const timeline_result full = walk_timeline(inv, accum, timeline_detail::every_event);
                  const timeline_result fast = walk_timeline(inv, accum, timeline_detail::peak);
                  INFO(layers << " " << family_name(family) << " " << recompute_name(rc) << " " << attention_name(att)
                              << " accum " << accum << " " << optimizer_name(opt) << " " << precision_name(p) << " seq " << seq);
                  CHECK(fast.peak.live_bytes == full.peak.live_bytes);
                  CHECK(describe_point(fast.peak, accum) == describe_point(full.peak, accum));
                  for (int c = 0; c < tensor_category_count; ++c)
                    CHECK(fast.category_bytes_at_peak[c] == full.category_bytes_at_peak[c]);
                  ++cases;
                }
  CHECK(cases == 3 * 2 * 3 * 2 * 2 * 3 * 4 * 2);
}

TEST_CASE("the peak-only walk also holds for pipeline stages, adapters, offload and ZeRO", "[timeline]") {
  for (bool first : {true, false})
    for (std::uint64_t inflight : {1, 4})
      for (finetune_kind ft : {finetune_kind::full, finetune_kind::lora, finetune_kind::qlora})
        for (int zero : {0, 3})
          for (std::uint64_t accum : {1, 4}) {
            model_spec m = gpt_shape(3, 256, 4, 30000);
            run_config r = run_of(512, 2, recompute_mode::selective, attention_kind::eager, 0.1);
            r.finetune = ft;
            r.zero = zero;
            r.gpus = 4;
            r.grad_accum = accum;
            r.offload = zero == 3 ? offload_mode::both : offload_mode::optimizer;
            const inventory inv = build_inventory(m, r, make_precision_layout(r.precision, r.grad_dtype), nullptr,
                                                  {first, !first, inflight});
            const timeline_result full = walk_timeline(inv, accum, timeline_detail::every_event);
            const timeline_result fast = walk_timeline(inv, accum, timeline_detail::peak);
            INFO((first ? "first" : "last") << " stage, inflight " << inflight << " " << finetune_name(ft) << " zero " << zero
                                            << " accum " << accum);
            CHECK(fast.peak.live_bytes == full.peak.live_bytes);
            CHECK(describe_point(fast.peak, accum) == describe_point(full.peak, accum));
          }
}

TEST_CASE("the peak-only walk holds for the hf profile, whose gradients appear layer by layer", "[timeline][hf]") {
  // Small sequences make each layer's gradients outweigh what it saved (the backward's live bytes then
  // grow layer by layer); long ones the reverse; a big vocabulary makes the loss the peak.
  int cases = 0;
  for (std::uint64_t layers : {1, 2, 5})
    for (model_family family : {model_family::gpt, model_family::llama})
      for (recompute_mode rc : {recompute_mode::none, recompute_mode::full})
        for (attention_kind att : {attention_kind::eager, attention_kind::flash})
          for (std::uint64_t accum : {1, 3})
            for (optimizer_impl_kind impl : {optimizer_impl_kind::foreach_impl, optimizer_impl_kind::fused})
              for (precision_regime p : {precision_regime::amp_bf16, precision_regime::bf16, precision_regime::fp32})
                for (finetune_kind ft : {finetune_kind::full, finetune_kind::lora})
                  for (std::uint64_t seq : {4, 16, 2048}) {
                    model_spec m = gpt_shape(layers, 256, 4, seq == 16 ? 50000 : 100);
                    if (family == model_family::llama) m.family = family, m.kv_heads = 2, m.tied_embeddings = false;
                    run_config r = run_of(seq, 2, rc, att, family == model_family::gpt ? 0.1 : 0.0);
                    r.profile = &profile_named("hf");
                    r.grad_accum = accum;
                    r.optimizer_impl = impl;
                    r.precision = p;
                    r.finetune = ft;
                    const inventory inv = build_inventory(m, r, make_precision_layout(p, r.grad_dtype));
                    const timeline_result full = walk_timeline(inv, accum, timeline_detail::every_event);
                    const timeline_result fast = walk_timeline(inv, accum, timeline_detail::peak);
                    INFO(layers << " " << family_name(family) << " " << recompute_name(rc) << " " << attention_name(att)
                                << " accum " << accum << " " << optimizer_impl_name(impl) << " " << precision_name(p) << " "
                                << finetune_name(ft) << " seq " << seq);
                    CHECK(fast.peak.live_bytes == full.peak.live_bytes);
                    CHECK(describe_point(fast.peak, accum) == describe_point(full.peak, accum));
                    ++cases;
                  }
  CHECK(cases == 3 * 2 * 2 * 2 * 2 * 2 * 3 * 2 * 3);
}
