// The fit of a cluster's effective bus bandwidths to measured collectives (cluster_fit.hpp).
#include "planner/measure/cluster_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "planner/measure/median.hpp"
#include "planner/time/collectives.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {
namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

cluster_fit fit_cluster(const cluster_spec& cluster, const std::vector<measured_file>& files) {
  cluster_spec base = cluster;
  base.fitted.clear();  // a refit starts from the model, not from an earlier fit
  cluster_fit fit;
  for (const measured_file& f : files)
    for (const measured_run& r : f.runs) {
      fit.left_out += r.collectives_left_out;
      for (const measured_collective& m : r.collectives) {
        if (m.ranks / m.nodes > base.gpus_per_node)
          throw input_error(fmt::format("calibrate --cluster-from: run {}: a {} over {} ranks on {} node{} has {} ranks a "
                                        "node, but a {} node holds {} GPUs: measured on another cluster (--cluster)",
                                        r.id, collective_name(m.coll), m.ranks, m.nodes, m.nodes == 1 ? "" : "s",
                                        m.ranks / m.nodes, base.name, base.gpus_per_node));
        cluster_fit_sample s{r.id, m.coll, m.nodes > 1 ? link_scope::inter_node : link_scope::intra_node, m.message_bytes,
                             m.ranks, m.nodes, m.calls, m.seconds, 0};
        s.predicted_seconds = collective_seconds(base, m.coll, m.message_bytes, group_placement{m.ranks, m.nodes});
        if (!(s.predicted_seconds > 0)) {
          ++fit.left_out;
          continue;
        }
        fit.samples.push_back(s);
      }
    }
  if (fit.samples.empty())
    throw input_error("calibrate --cluster-from: the reports hold no collective the planner times (collect_hf.py --parallel "
                      "under torchrun with --profile records them)");
  std::map<std::pair<collective, link_scope>, std::vector<const cluster_fit_sample*>> groups;
  for (const cluster_fit_sample& s : fit.samples) groups[{s.coll, s.scope}].push_back(&s);
  for (const auto& [key, samples] : groups) {
    cluster_fit_row row{key.first, key.second, samples.size()};
    std::vector<double> ratios, before, after;
    for (const cluster_fit_sample* s : samples) ratios.push_back(s->ratio());
    row.median_ratio = median_of(ratios);
    row.factor = 1 / row.median_ratio;
    for (const cluster_fit_sample* s : samples) {
      before.push_back(100 * (s->predicted_seconds / s->measured_seconds - 1));
      after.push_back(100 * (s->predicted_seconds * row.median_ratio / s->measured_seconds - 1));
    }
    const error_summary b = summarize_errors(before), a = summarize_errors(after);
    row.median_error_before_pct = b.median_pct, row.max_error_before_pct = b.max_pct;
    row.median_error_after_pct = a.median_pct, row.max_error_after_pct = a.max_pct;
    fit.rows.push_back(row);
  }
  return fit;
}

}  // namespace trainplan
