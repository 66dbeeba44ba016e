#pragma once
// A backward event written op by op (inventory::backward_programs) resolved against an inventory, for the
// allocator replay's schedule (allocator_schedule.cpp).
#include <cstdint>
#include <vector>

#include "planner/memory/inventory.hpp"
#include "planner/model/model_facts.hpp"

namespace trainplan {

// A backward event's steps (inventory::backward_programs) against this inventory: for each buffer the step that
// allocates it and the one that frees it (-1: none), and the steps that allocate one parameter's piece of a
// split gradient buffer. Step k's place in the event is position(k) (two apart, so that an operation can go just
// before a step: AccumulateGrad's incoming gradients, allocator_schedule.cpp).
struct resolved_program {
  std::uint64_t count = 0;         // 0: the event is not written op by op
  std::uint64_t recompute_at = 0;  // the steps before it come before the recomputation
  std::vector<std::int32_t> alloc_at, free_at;
  struct piece_step {
    std::uint32_t tensor;
    std::int32_t piece, step;
    // The step that allocates the next buffer after this one: in a micro-batch after the first, the piece is an
    // incoming gradient AccumulateGrad adds into the .grad and drops before the engine runs on (count: none).
    std::int32_t next_alloc;
    bool vocabulary_table;  // the tied token table's: its later contributions are buffers of their own
  };
  std::vector<piece_step> pieces;
};

// A step whose condition applies (backward_step::applies) must name a buffer the inventory holds, and a part one
// of the parameters that buffer stands for: a program that names what is not there is a mistake in the program,
// never something to skip.
resolved_program resolve_program(const backward_program& program, const inventory& inv, const model_facts& facts,
                                 std::vector<std::vector<std::uint64_t>>& sizes, std::vector<std::vector<bool>>& placed);

}  // namespace trainplan
