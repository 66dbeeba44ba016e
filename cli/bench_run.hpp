#pragma once
// The model and run of one `plan bench --backend cuda` case, as the bench trains it and as `plan calibrate`
// rebuilds it from bench.json (which names the model, sequence and micro-batch only): the catalog's model, its
// position table long enough for the sequence (GPT-2's 1,024 positions at s2048), bf16-mixed AdamW with flash
// attention and no recomputation (run_config's defaults).
#include <algorithm>
#include <cstdint>
#include <string>

#include "planner/io/catalog.hpp"
#include "planner/model/model_spec.hpp"
#include "planner/run/run_config.hpp"

namespace trainplan::cli {

inline void bench_model_and_run(const catalog& data, const std::string& model, std::uint64_t seq, std::uint64_t micro_batch,
                                model_spec& m, run_config& r) {
  m = data.model(model).spec;
  m.max_positions = std::max<std::uint64_t>(m.max_positions, seq);
  r = run_config{};
  r.seq = seq;
  r.micro_batch = micro_batch;
  r.attention = attention_kind::flash;
}

}  // namespace trainplan::cli
