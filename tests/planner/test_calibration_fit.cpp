#include <catch2/catch.hpp>

#include "planner/calibration_fit.hpp"
#include "planner/input_error.hpp"

using namespace trainplan;

namespace {

// Runs generated from known constants: the fit must give them back.
std::vector<calibration_observation> runs_from(const calibration& truth, double noise_pct = 0) {
  std::vector<calibration_observation> runs;
  const double sizes[] = {1024, 2048, 4096, 8192, 16384};
  const std::uint64_t tensors[] = {10ull << 30, 20ull << 30, 35ull << 30, 50ull << 30, 70ull << 30};
  for (int k = 0; k < 5; ++k) {
    calibration_observation o;
    o.label = "run" + std::to_string(k);
    o.tensor_peak_bytes = tensors[k];
    o.context_bytes = truth.cuda_context_bytes + (k == 2 ? 4096 : 0);  // one odd run: the median ignores it
    o.workspace_bytes = truth.cublas_workspace_bytes;
    o.device_peak_bytes = tensors[k] + static_cast<std::uint64_t>(tensors[k] * truth.allocator_slack_fraction) +
                          truth.cuda_context_bytes + truth.cublas_workspace_bytes;
    o.peak_flops_per_s = 989.4e12;
    o.hardware_flops = 1e15 * (k + 1);
    o.optimizer_seconds = 0.05;
    o.tokens_per_micro_batch = sizes[k];
    o.step_seconds = o.hardware_flops / (o.peak_flops_per_s * truth.efficiency_at(sizes[k])) + o.optimizer_seconds;
    o.step_seconds *= 1 + (k % 2 ? noise_pct : -noise_pct) / 100;
    runs.push_back(o);
  }
  return runs;
}

}  // namespace

TEST_CASE("calibration fitting recovers known constants", "[calibrate]") {
  calibration truth;
  truth.cuda_context_bytes = 600ull << 20;
  truth.cublas_workspace_bytes = 32ull << 20;
  truth.allocator_slack_fraction = 0.03;
  truth.achieved_efficiency = 0.6;
  truth.efficiency_half_tokens = 2048;
  calibration base;
  base.safety_margin_fraction = 0.05;
  const calibration_fit fit = fit_calibration(runs_from(truth), base);
  CHECK(fit.fitted.cuda_context_bytes == truth.cuda_context_bytes);
  CHECK(fit.fitted.cublas_workspace_bytes == truth.cublas_workspace_bytes);
  CHECK(fit.fitted.allocator_slack_fraction == Approx(0.03).epsilon(1e-6));
  CHECK(fit.fitted.achieved_efficiency == Approx(0.6).epsilon(1e-6));
  CHECK(fit.fitted.efficiency_half_tokens == Approx(2048).epsilon(1e-6));
  CHECK(fit.fitted.safety_margin_fraction == 0.05);  // not measured: kept from the base
  CHECK(fit.max_memory_error_pct < 1e-6);
  CHECK(fit.max_time_error_pct < 1e-6);
}

TEST_CASE("calibration residuals show the noise the fit cannot remove", "[calibrate]") {
  calibration truth;
  truth.cuda_context_bytes = 500ull << 20;
  truth.cublas_workspace_bytes = 32ull << 20;
  truth.allocator_slack_fraction = 0.02;
  truth.achieved_efficiency = 0.5;
  truth.efficiency_half_tokens = 1000;
  const calibration_fit fit = fit_calibration(runs_from(truth, 5.0), calibration{});
  CHECK(fit.max_time_error_pct > 1.0);   // +-5% alternating noise cannot be fitted away
  CHECK(fit.max_time_error_pct < 10.0);  // but the fit stays close
  CHECK(fit.residuals.size() == 5);
}

TEST_CASE("one GEMM size gives a constant efficiency, impossible runs are errors", "[calibrate]") {
  calibration truth;
  truth.achieved_efficiency = 0.45;
  std::vector<calibration_observation> runs = runs_from(truth);
  for (auto& r : runs) {
    r.tokens_per_micro_batch = 4096;
    r.step_seconds = r.hardware_flops / (r.peak_flops_per_s * 0.45) + r.optimizer_seconds;
  }
  const calibration_fit fit = fit_calibration(runs, calibration{});
  CHECK(fit.fitted.efficiency_half_tokens == 0);
  CHECK(fit.fitted.achieved_efficiency == Approx(0.45));
  runs[0].step_seconds = 0.01;  // faster than its optimizer alone
  CHECK_THROWS_AS(fit_calibration(runs, calibration{}), input_error);
  CHECK_THROWS_AS(fit_calibration({}, calibration{}), input_error);
}
