// Documents in a packed row (planner/run/packing.hpp), against hand counts.
#include <catch2/catch.hpp>

#include "planner/run/packing.hpp"

using namespace trainplan;

TEST_CASE("a packed row holds whole documents and the remainder of one more", "[unit][packing]") {
  const packed_row four = packed_row_of(4096, 1024);
  CHECK(four.full_documents == 4);
  CHECK(four.remainder_tokens == 0);
  CHECK(four.documents() == 4);
  // 4096 = 4 x 1000 + 96.
  const packed_row odd = packed_row_of(4096, 1000);
  CHECK(odd.full_documents == 4);
  CHECK(odd.doc_tokens == 1000);
  CHECK(odd.remainder_tokens == 96);
  CHECK(odd.documents() == 5);
  // Off, or documents no shorter than the row: one document, the row.
  for (const std::uint64_t doc : {0ull, 4096ull, 8192ull}) {
    const packed_row one = packed_row_of(4096, doc);
    CHECK(one.documents() == 1);
    CHECK(one.doc_tokens == 4096);
  }
}

TEST_CASE("packed documents attend within themselves: four of 1024 a quarter of a row of 4096", "[unit][packing]") {
  // Square convention (planner/time/flops.hpp): a document of d tokens counts d^2 keys.
  const double unpacked = packed_attended_key_sum(packed_row_of(4096, 0));
  CHECK(unpacked == 4096.0 * 4096.0);
  CHECK(packed_attended_key_sum(packed_row_of(4096, 1024)) == 4.0 * 1024 * 1024);
  CHECK(packed_attended_key_sum(packed_row_of(4096, 1024)) == unpacked / 4);
  // 4 x 1000^2 + 96^2.
  CHECK(packed_attended_key_sum(packed_row_of(4096, 1000)) == 4.0 * 1000 * 1000 + 96.0 * 96);
  // A window of 512 inside each document of 1024: each token sees at most 512 keys.
  CHECK(packed_attended_key_sum(packed_row_of(4096, 1024), 512) == 4.0 * 1024 * 512);
  // A window longer than the documents changes nothing.
  CHECK(packed_attended_key_sum(packed_row_of(4096, 1024), 4096) == 4.0 * 1024 * 1024);
}

TEST_CASE("a row of one document is not packed", "[unit][packing]") {
  run_config r;
  r.seq = 4096;
  CHECK_FALSE(packs_documents(r));
  r.packing_doc_tokens = 4096;
  CHECK_FALSE(packs_documents(r));
  r.packing_doc_tokens = 4095;  // 4095 and 1
  CHECK(packs_documents(r));
}
