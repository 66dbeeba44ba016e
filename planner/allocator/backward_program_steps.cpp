// A backward program's steps resolved against an inventory (backward_program_steps.hpp).
#include "planner/allocator/backward_program_steps.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <string_view>

#include "planner/allocator/tensor_pieces.hpp"

namespace trainplan {

resolved_program resolve_program(const backward_program& program, const inventory& inv, const model_facts& facts,
                                 std::vector<std::vector<std::uint64_t>>& sizes, std::vector<std::vector<bool>>& placed) {
  resolved_program r;
  if (program.count == 0) return r;
  r.count = program.count;
  r.recompute_at = program.count;
  r.alloc_at.assign(inv.tensors.size(), -1);
  r.free_at.assign(inv.tensors.size(), -1);
  const std::size_t first_piece = r.pieces.size();
  for (std::size_t k = 0; k < program.count; ++k) {
    const backward_step& st = program.steps[k];
    if (!st.applies(program.holds)) continue;
    const std::int32_t step = static_cast<std::int32_t>(k);
    if (st.kind == backward_step::recompute) {
      r.recompute_at = std::min<std::uint64_t>(r.recompute_at, k);
      continue;
    }
    bool found = false;
    for (std::uint32_t i = 0; i < inv.tensors.size(); ++i) {
      const tensor_spec& t = inv.tensors[i];
      if (t.name != st.tensor || !t.replayed) continue;
      if (st.kind == backward_step::free) {
        r.free_at[i] = step;
        found = true;
      } else if (st.part.empty()) {
        r.alloc_at[i] = step;
        found = true;
      } else {
        std::vector<std::string_view> names;
        std::vector<std::uint64_t> split = split_by_parameters(t, facts, inv, &names);
        const auto at = std::find(names.begin(), names.end(), st.part);
        if (at == names.end()) continue;
        found = true;
        if (sizes[i].empty()) sizes[i] = std::move(split);
        placed[i].resize(sizes[i].size());
        const std::int32_t piece = static_cast<std::int32_t>(at - names.begin());
        placed[i][static_cast<std::size_t>(piece)] = true;
        const bool table = std::any_of(facts.tensors.begin(), facts.tensors.end(), [&](const param_tensor& p) {
          return p.name == st.part && p.vocabulary_table();
        });
        r.pieces.push_back({i, piece, step, -1, table});
      }
    }
    if (!found)
      throw std::logic_error(fmt::format("backward program step {} ({} {}{}{}) names no buffer of the inventory", k,
                                         st.kind == backward_step::free ? "free" : "alloc", st.tensor,
                                         st.part.empty() ? "" : " part ", st.part));
  }
  for (std::size_t p = first_piece; p < r.pieces.size(); ++p) {
    resolved_program::piece_step& ps = r.pieces[p];
    for (std::size_t k = static_cast<std::size_t>(ps.step) + 1; k < program.count && ps.next_alloc < 0; ++k) {
      const backward_step& st = program.steps[k];
      if (st.applies(program.holds) && st.kind == backward_step::alloc) ps.next_alloc = static_cast<std::int32_t>(k);
    }
  }
  return r;
}

}  // namespace trainplan
