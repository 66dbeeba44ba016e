// The estimate against the replay on collector reports (estimate_error.hpp).
#include "planner/measure/estimate_error.hpp"

#include <fstream>
#include <sstream>

#include "planner/evaluate/plan.hpp"
#include "planner/measure/measured_runs.hpp"
#include "planner/model/model_facts.hpp"
#include "planner/util/input_error.hpp"

namespace trainplan {

estimate_rows estimate_against_replay(const catalog& data, const std::vector<std::filesystem::path>& folders) {
  estimate_rows out;
  for (const std::filesystem::path& folder : folders)
    for (const auto& entry : std::filesystem::directory_iterator(folder)) {
      if (entry.path().extension() != ".jsonl") continue;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      measured_file f;
      try {
        f = parse_measurements(text.str(), entry.path().filename().string());
      } catch (const input_error&) {
        continue;  // not a collector report
      }
      const gpu_spec* gpu = data.gpu_by_device_name(f.gpu);
      if (!gpu) continue;
      ++out.files;
      const calibration calib = data.calibration_for(*gpu);
      for (const measured_run& r : f.runs) {
        // Memory measured on one GPU, in a configuration the planner predicts.
        if (!r.memory_measured || r.out_of_memory || r.layout || r.compiled) continue;
        try {
          plan_options options;
          options.detail = timeline_detail::peak;
          plan_result p = evaluate_plan(r.model, r.run, *gpu, calib, options);
          if (!replays_allocator(p.run)) continue;
          estimate_row row{f.gpu + " " + r.id, gpu->name, r.model, r.run, p.peak_bytes, 0};
          apply_allocator_replay(p, describe_model(r.model), gpu->memory_bytes);
          row.replay_bytes = p.peak_bytes;
          out.rows.push_back(std::move(row));
        } catch (const input_error&) {
          continue;
        }
      }
    }
  return out;
}

}  // namespace trainplan
