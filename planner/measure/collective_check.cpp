#include "planner/measure/collective_check.hpp"

#include "planner/time/collectives.hpp"
#include "planner/util/names.hpp"

namespace trainplan {
namespace {

constexpr named<check_role> role_names[] = {
    {check_role::held_out, "held out"},       {check_role::leave_one_out, "leave-one-out"},
    {check_role::constant_source, "source"},  {check_role::forced, "forced"},
    {check_role::modified_driver, "modified"},
};

}  // namespace

std::string_view check_role_name(check_role r) { return name_of(role_names, r); }

std::vector<collective_check_row> check_collectives(const std::vector<cluster_spec>& clusters) {
  std::vector<collective_check_row> rows;
  for (const cluster_spec& c : clusters) {
    const measured_series* sweep = c.intra_sweep();
    for (std::size_t si = 0; si < c.series.size(); ++si) {
      const measured_series& s = c.series[si];
      const bool is_sweep = sweep == &s;
      for (std::size_t pi = 0; pi < s.points.size(); ++pi) {
        const measured_point& p = s.points[pi];
        const double factor = bus_factor(s.coll, s.gpus);
        const double measured = p.time_us ? *p.time_us * 1e-6
                                : p.bus_gbytes_per_s > 0 ? p.message_bytes * factor / (p.bus_gbytes_per_s * 1e9)
                                                         : 0;
        if (!(measured > 0)) continue;
        collective_check_row row{c.name, s.coll, s.gpus, s.nodes, std::string(nccl_algorithm_name(s.algorithm)),
                                 p.message_bytes, measured, 0, 0, check_role::held_out, p.source};
        if (!s.stock) row.role = check_role::modified_driver;
        else if (s.algorithm_forced) row.role = check_role::forced;
        else if (!s.source_of.empty()) row.role = check_role::constant_source;
        else if (is_sweep) row.role = check_role::leave_one_out;
        const group_placement group{s.gpus, s.nodes};
        if (is_sweep) {  // the sweep without this point
          cluster_spec without = c;
          without.series[si].points.erase(without.series[si].points.begin() + static_cast<std::ptrdiff_t>(pi));
          row.predicted_seconds = collective_seconds(without, s.coll, p.message_bytes, group);
        } else {
          row.predicted_seconds = collective_seconds(c, s.coll, p.message_bytes, group);
        }
        row.error = row.predicted_seconds / measured - 1;
        rows.push_back(std::move(row));
      }
    }
  }
  return rows;
}

}  // namespace trainplan
