// The chunks of the losses that never build the whole logits (planner/profiles/hf/hf_loss_chunks.cpp), against
// their sources' own figures.
#include <catch2/catch.hpp>

#include "planner/profiles/hf/hf_loss_chunks.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;

namespace {

run_config run_with(std::uint64_t seq, std::uint64_t batch, loss_kind loss, std::uint64_t chunks = 0) {
  run_config r = test::run_of(seq, batch, recompute_mode::none, attention_kind::flash, 0.0);
  r.loss = loss, r.loss_chunks = chunks;
  return r;
}

}  // namespace

TEST_CASE("Liger's chunk size follows its source's worked example", "[unit][hf][loss]") {
  // liger_kernel/ops/fused_linear_cross_entropy.py's comment: BT = 4096 * 4, V = 32000, H = 4096 gives
  // inc_factor = 8 and chunk_size = 2048.
  model_spec m;
  m.hidden = 4096, m.vocab = 32000;
  const hf_loss_chunking c = hf_loss_chunks(m, run_with(4096, 4, loss_kind::fused_linear));
  CHECK(c.largest_rows == 2048);
  CHECK(c.chunks == 8);
  // A vocabulary no wider than the hidden size: one chunk of every token (chunk_size capped at BT).
  m.vocab = 4096;
  CHECK(hf_loss_chunks(m, run_with(100, 3, loss_kind::fused_linear)).chunks == 1);
  CHECK(hf_loss_chunks(m, run_with(100, 3, loss_kind::fused_linear)).largest_rows == 300);
}

TEST_CASE("torchtune's chunks default to 8 and follow tensor_split", "[unit][hf][loss]") {
  const model_spec m;
  CHECK(hf_loss_chunks(m, run_with(4096, 2, loss_kind::chunked)).chunks == 8);
  CHECK(hf_loss_chunks(m, run_with(4096, 2, loss_kind::chunked)).largest_rows == 1024);
  // torch.tensor_split(10 positions, 3): sizes 4, 3, 3.
  const run_config r = run_with(10, 1, loss_kind::chunked, 3);
  CHECK(chunked_loss_rows(r, 3, 0) == 4);
  CHECK(chunked_loss_rows(r, 3, 1) == 3);
  CHECK(chunked_loss_rows(r, 3, 2) == 3);
  CHECK(hf_loss_chunks(m, r).largest_rows == 4);
  // The standard loss: one chunk of every token.
  CHECK(hf_loss_chunks(m, run_with(10, 2, loss_kind::standard)).largest_rows == 20);
}
