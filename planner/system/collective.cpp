#include "planner/system/collective.hpp"

#include "planner/util/names.hpp"

namespace trainplan {
namespace {

constexpr named<collective> collective_names[] = {
    {collective::all_reduce, "all_reduce"},         {collective::all_gather, "all_gather"},
    {collective::reduce_scatter, "reduce_scatter"}, {collective::all_to_all, "all_to_all"},
    {collective::send_recv, "send_recv"},
};

}  // namespace

std::string_view collective_name(collective c) { return name_of(collective_names, c); }

collective parse_collective(std::string_view text, std::string_view where) {
  return parse_named(collective_names, text, where, "collective");
}

double bus_factor(collective c, std::uint64_t ranks) {
  if (ranks <= 1) return 0;  // nothing crosses a link
  const double n = static_cast<double>(ranks);
  switch (c) {
    case collective::all_reduce: return 2 * (n - 1) / n;
    case collective::all_gather:
    case collective::reduce_scatter:
    case collective::all_to_all: return (n - 1) / n;
    case collective::send_recv: return 1;
  }
  return 0;
}

}  // namespace trainplan
