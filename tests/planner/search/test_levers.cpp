// The levers of issue 14 (planner/search/levers.hpp): names, what a change costs, the flags that reproduce it,
// which alternatives each framework can train, and the search space they span.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "planner/model/model_facts.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/util/input_error.hpp"
#include "planner/search/levers.hpp"
#include "planner/search/search.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using trainplan::test::data;
using trainplan::test::hf_headline_run;


TEST_CASE("lever names parse both ways and unknown ones are named in the error", "[levers]") {
  CHECK(parse_levers("precision,optimizer,gpus", "--keep") == (lever_precision | lever_optimizer | lever_gpus));
  CHECK(parse_levers("optimizer-impl,seq", "--levers") == (lever_optimizer_impl | lever_seq));
  CHECK(lever_names(lever_recompute | lever_adapters) == "recompute, adapters");
  CHECK(lever_names(0) == "none");
  CHECK(parse_levers(lever_names(every_lever), "--levers") == every_lever);  // the list the error prints parses
  CHECK_THROWS_WITH(parse_levers("precision,colour", "--levers"), Catch::Contains("--levers: unknown lever 'colour'"));
  CHECK_THROWS_AS(parse_levers("", "--keep"), input_error);
}

TEST_CASE("a change's flags, levers and costs come from the difference of two runs", "[levers]") {
  const run_config base = hf_headline_run();
  run_config to = base;
  to.recompute = recompute_mode::full;
  to.precision = precision_regime::bf16;
  CHECK(change_flags(base, to) == std::vector<std::string>{"--recompute full", "--precision bf16"});
  CHECK(levers_changed(base, to) == (lever_recompute | lever_precision));
  CHECK(change_costs(base, to) == cost_numerics);

  run_config split = base;
  split.micro_batch = 1, split.grad_accum = 1;  // nothing changed
  CHECK(change_flags(base, split).empty());
  CHECK(change_costs(base, split) == cost_none);
  CHECK(suggestion_cost_text(cost_none) == "same numerics");

  run_config wide = base;
  wide.gpus = 4, wide.zero = 3;
  wide.offload = offload_mode::optimizer;
  CHECK(change_flags(base, wide) == std::vector<std::string>{"--offload optimizer", "--gpus 4 --zero 3"});
  CHECK(change_costs(base, wide) == (cost_hardware | cost_slower));
  CHECK(suggestion_cost_text(cost_hardware | cost_slower) == "more hardware, slower");
  CHECK(cost_rank(cost_hardware | cost_slower) > cost_rank(cost_numerics));

  // Under hf the default precision moves with --finetune (bf16 with lora, amp-bf16 otherwise): a change of
  // fine-tuning names the precision when the changed run's is not the default it would get, so that the
  // printed flags rerun what was evaluated even where the user relied on the default.
  REQUIRE(base.precision == precision_regime::amp_bf16);
  run_config lora = base;
  lora.finetune = finetune_kind::lora;
  CHECK(change_flags(base, lora) == std::vector<std::string>{"--precision amp-bf16", "--finetune lora"});
  lora.precision = precision_regime::bf16;  // the lora default: the flag is still named, as a change
  CHECK(change_flags(base, lora) == std::vector<std::string>{"--precision bf16", "--finetune lora"});
  run_config pure = base;
  pure.precision = precision_regime::bf16;
  lora.precision = precision_regime::bf16;
  CHECK(change_flags(pure, lora) == std::vector<std::string>{"--finetune lora"});  // bf16 is lora's default
  run_config qlora = base;
  qlora.finetune = finetune_kind::qlora;  // qlora's default is amp-bf16, as the base's
  CHECK(change_flags(base, qlora) == std::vector<std::string>{"--finetune qlora"});
  CHECK(cost_rank(cost_slower) > cost_rank(cost_none));
  CHECK(cost_rank(cost_slower) < cost_rank(cost_numerics));

  run_config shorter = base;
  shorter.seq = 2048;
  CHECK(change_costs(base, shorter) == cost_shorter_seq);
  CHECK(suggestion_cost_text(cost_shorter_seq) == "shorter sequences");

  // A precision change resets an fp32 gradient buffer, and the flags say so: rerun as printed, the
  // user's --grad-dtype fp32 would otherwise stay.
  run_config fp32_grads = base;
  fp32_grads.grad_dtype = grad_dtype_choice::fp32;
  const model_spec& m = data().model("llama-2-7b").spec;
  for (const lever_change& c : lever_alternatives(lever_precision, m, fp32_grads, data().gpu("h100"))) {
    run_config r = fp32_grads;
    c.apply(r);
    const std::vector<std::string> flags = change_flags(fp32_grads, r);
    CHECK(std::find(flags.begin(), flags.end(), "--grad-dtype auto") != flags.end());
  }
}

TEST_CASE("each framework is offered only the alternatives it can train", "[levers]") {
  const gpu_spec& h100 = data().gpu("h100");
  const model_spec& llama = data().model("llama-2-7b").spec;
  auto applied = [](const std::vector<lever_change>& cs, const run_config& base) {
    std::vector<run_config> out;
    for (const lever_change& c : cs) c.apply(out.emplace_back(base));
    return out;
  };
  // hf: Hugging Face checkpoints whole layers and trains in fp32, amp or pure bf16 (no bf16-mixed, no fp8).
  const run_config hf = hf_headline_run();
  for (const run_config& r : applied(lever_alternatives(lever_recompute, llama, hf, h100), hf))
    CHECK(r.recompute == recompute_mode::full);
  const std::vector<run_config> hf_precisions = applied(lever_alternatives(lever_precision, llama, hf, h100), hf);
  REQUIRE(hf_precisions.size() == 1);
  CHECK(hf_precisions[0].precision == precision_regime::bf16);
  CHECK(lever_alternatives(lever_optimizer_impl, llama, hf, h100).size() == 1);

  // trainplan on an H100 may go to pure bf16 or fp8-mixed; on an A100 (no fp8) not fp8.
  run_config own = hf;
  own.profile = &profile_named("trainplan");
  own.precision = precision_regime::bf16_mixed;
  std::set<precision_regime> seen;
  for (const run_config& r : applied(lever_alternatives(lever_precision, llama, own, h100), own)) seen.insert(r.precision);
  CHECK(seen == std::set<precision_regime>{precision_regime::bf16, precision_regime::fp8_mixed});
  for (const run_config& r : applied(lever_alternatives(lever_precision, llama, own, data().gpu("a100-80gb")), own))
    CHECK(r.precision != precision_regime::fp8_mixed);
  CHECK(lever_alternatives(lever_optimizer_impl, llama, own, h100).empty());  // a PyTorch choice

  // llm.c: AdamW only, no adapters, no offload.
  run_config llmc;
  llmc.profile = &profile_named("llmc");
  llmc.seq = 1024;
  const model_spec& gpt2 = data().model("gpt2").spec;
  CHECK(lever_alternatives(lever_optimizer, gpt2, llmc, h100).empty());
  CHECK(lever_alternatives(lever_adapters, gpt2, llmc, h100).empty());
  CHECK(lever_alternatives(lever_offload, gpt2, llmc, h100).empty());
}

TEST_CASE("the lever space is every distinct combination, the run as given first", "[levers]") {
  const run_config base = hf_headline_run();
  const model_spec& m = data().model("llama-2-7b").spec;
  const gpu_spec& h100 = data().gpu("h100");
  // hf: recompute {none, full} x precision {amp-bf16, bf16} x optimizer {adamw, 8-bit, adafactor, lion}.
  const std::vector<run_config> space = lever_space(lever_recompute | lever_precision | lever_optimizer, m, base, h100);
  CHECK(space.size() == 2 * 2 * 4);
  CHECK(change_flags(base, space.front()).empty());
  std::set<std::vector<std::string>> distinct;
  for (const run_config& r : space) distinct.insert(change_flags(base, r));
  CHECK(distinct.size() == space.size());
  // GPUs: 2, 4, 8 each with ZeRO 1, 2, 3; fused AdamW applies only where AdamW stays.
  CHECK(lever_space(lever_gpus, m, base, h100).size() == 1 + 3 * 3);
  CHECK(lever_space(lever_optimizer | lever_optimizer_impl, m, base, h100).size() == 4 + 1);
}

TEST_CASE("search --levers widens the axes and keeps the run as given as the first point", "[levers][search]") {
  sweep_space s;
  const model_spec& m = data().model("llama-2-7b").spec;
  s.models.push_back({m, describe_model(m)});
  s.gpus.push_back({data().gpu("h100"), data().calibration_for(data().gpu("h100"))});
  s.base = hf_headline_run();
  s.precisions = {precision_regime::amp_bf16};
  s.recomputes = {recompute_mode::none};
  const run_config before = s.at(0).run;
  widen_by_levers(s, lever_precision | lever_recompute | lever_adapters | lever_gpus);
  CHECK(change_flags(before, s.at(0).run).empty());
  CHECK(s.precisions == std::vector<precision_regime>{precision_regime::amp_bf16, precision_regime::bf16});
  CHECK(s.recomputes == std::vector<recompute_mode>{recompute_mode::none, recompute_mode::full});
  CHECK(s.finetunes.size() == 3);
  CHECK(s.layouts.size() == 1 + 9);
  CHECK(s.size() == 2 * 2 * 3 * 10);
  CHECK_THROWS_AS(widen_by_levers(s, lever_seq), input_error);
}

TEST_CASE("the ep lever: every larger expert parallelism the experts and GPUs allow, searchable", "[levers][moe]") {
  const model_spec& mixtral = data().model("mixtral-8x7b").spec;
  const gpu_spec& h100 = data().gpu("h100");
  run_config r;
  r.profile = &profile_named("megatron");
  r.precision = precision_regime::megatron_bf16;
  r.seq = 4096, r.gpus = 8, r.zero = 1;
  std::vector<std::uint64_t> eps;
  for (const lever_change& c : lever_alternatives(lever_ep, mixtral, r, h100)) {
    run_config x = r;
    c.apply(x);
    eps.push_back(x.ep);
    CHECK(change_costs(r, x) == cost_none);  // the same numerics on the same GPUs
  }
  CHECK(eps == std::vector<std::uint64_t>{2, 4, 8});
  CHECK(lever_alternatives(lever_ep, data().model("llama-2-7b").spec, r, h100).empty());  // dense
  r.profile = &profile_named("hf");  // Hugging Face has no expert parallelism
  r.precision = precision_regime::amp_bf16;
  CHECK(lever_alternatives(lever_ep, mixtral, r, h100).empty());

  sweep_space s;
  s.models.push_back({mixtral, describe_model(mixtral)});
  s.gpus.push_back({h100, data().calibration_for(h100)});
  s.base.profile = &profile_named("megatron");
  s.base.gpus = 8, s.base.zero = 1;
  s.precisions = {precision_regime::megatron_bf16};
  widen_by_levers(s, lever_ep);
  CHECK(s.layouts.size() == 4);  // ep 1, 2, 4, 8
  CHECK(s.at(s.size() - 1).run.ep == 8);
}

TEST_CASE("the gpus lever raises ZeRO on the GPUs a data-parallel run already has, at no hardware cost", "[levers]") {
  const model_spec& llama = data().model("llama-2-7b").spec;
  const gpu_spec& h100 = data().gpu("h100");
  run_config r;
  r.profile = &profile_named("megatron");
  r.precision = precision_regime::megatron_bf16;
  r.seq = 4096, r.gpus = 8, r.zero = 1;
  std::set<int> same_gpus;
  for (const lever_change& c : lever_alternatives(lever_gpus, llama, r, h100)) {
    run_config x = r;
    c.apply(x);
    if (x.gpus != r.gpus) continue;
    same_gpus.insert(x.zero);
    CHECK(change_costs(r, x) == cost_none);
    // The stage alone: the command line that gave the run names its GPUs already.
    CHECK(change_flags(r, x) == std::vector<std::string>{fmt::format("--zero {}", x.zero)});
  }
  CHECK(same_gpus == std::set<int>{2, 3});
  r.gpus = 1, r.zero = 0;  // one GPU: nothing to shard over without more of them
  for (const lever_change& c : lever_alternatives(lever_gpus, llama, r, h100)) {
    run_config x = r;
    c.apply(x);
    CHECK(x.gpus > 1);
  }
}

TEST_CASE("the allocator lever turns on expandable segments under hf only, at no cost to the numerics", "[levers][expandable]") {
  const run_config base = hf_headline_run();
  const model_spec& llama = data().model("llama-2-7b").spec;
  const gpu_spec& h100 = data().gpu("h100");
  const std::vector<lever_change> offered = lever_alternatives(lever_allocator, llama, base, h100);
  REQUIRE(offered.size() == 1);
  run_config to = base;
  offered[0].apply(to);
  CHECK(to.expandable_segments);
  CHECK(change_flags(base, to) == std::vector<std::string>{"--expandable-segments"});
  CHECK(levers_changed(base, to) == lever_allocator);
  CHECK(change_costs(base, to) == cost_none);
  CHECK(lever_alternatives(lever_allocator, llama, to, h100).empty());  // already on
  run_config llmc = base;
  llmc.profile = &profile_named("llmc");
  CHECK(lever_alternatives(lever_allocator, llama, llmc, h100).empty());  // only hf replays PyTorch's allocator
}

TEST_CASE("the loss lever offers chunked and fused linear cross-entropy where the stack takes --loss", "[levers][loss]") {
  const run_config base = hf_headline_run();
  const model_spec& llama = data().model("llama-2-7b").spec;
  const gpu_spec& h100 = data().gpu("h100");
  const std::vector<lever_change> offered = lever_alternatives(lever_loss, llama, base, h100);
  REQUIRE(offered.size() == 2);
  std::vector<std::vector<std::string>> flags;
  for (const lever_change& c : offered) {
    run_config to = base;
    c.apply(to);
    flags.push_back(change_flags(base, to));
    CHECK(levers_changed(base, to) == lever_loss);
    CHECK(change_costs(base, to) == cost_library);  // the same loss, from torchtune's or Liger's kernels
    CHECK(suggestion_cost_text(change_costs(base, to)) == "another library");
  }
  CHECK(flags == std::vector<std::vector<std::string>>{{"--loss chunked"}, {"--loss fused-linear"}});
  run_config chunked = base;
  chunked.loss = loss_kind::chunked;
  CHECK(lever_alternatives(lever_loss, llama, chunked, h100).empty());  // already in pieces
  for (const char* own_loss : {"llmc", "megatron"}) {  // stacks whose loss is their own: --loss is refused there
    run_config r = base;
    r.profile = &profile_named(own_loss);
    r.precision = r.profile->default_precision(false);
    INFO(own_loss);
    CHECK(lever_alternatives(lever_loss, llama, r, h100).empty());
  }
}
