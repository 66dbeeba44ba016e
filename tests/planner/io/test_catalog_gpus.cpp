// The GPUs' entries beyond their datasheet figures (planner/io/catalog.cpp): each GPU's compute capability and where
// its memory figure comes from, and what a GPU without measurements of its own takes from calibration.json's
// reference GPU (catalog::calibration_for).
#include <catch2/catch.hpp>
#include <string>

#include "planner/io/catalog.hpp"
#include "planner/time/roofline.hpp"
#include "planner/util/input_error.hpp"
#include "tests/support/test_helpers.hpp"

using namespace trainplan;
using namespace trainplan::test;

namespace {

std::string gpu_entry(const std::string& name, const std::string& extra) {
  return R"({"name": ")" + name + R"(", "aliases": [], "description": "X", "memory_bytes": 1000,
    "memory_bandwidth_bytes_per_s": 1e12, "host_link_bytes_per_s": 1e10,
    "peak_dense_tflops": {"fp32": 1, "tf32": null, "bf16": 2, "fp16": 2, "fp8": null}, )" +
         extra + R"("source": "test"})";
}
// x1 is the reference (sm_90), x2 shares its compute capability, x3 is an sm_80 part, x4 does not say.
const std::string gpus = "{\"gpus\": [" + gpu_entry("x1", R"("compute_capability": "9.0", "memory_source": "measured", )") +
                         ", " + gpu_entry("x2", R"("compute_capability": "9.0", "memory_source": "estimate", )") + ", " +
                         gpu_entry("x3", R"("compute_capability": "8.0", "memory_source": "reported", )") + ", " +
                         gpu_entry("x4", "") + "]}";
const std::string models = R"({"models": [{"name": "m1", "family": "gpt", "nominal_params": "1M", "layers": 2,
  "hidden": 64, "heads": 4, "kv_heads": 4, "ffn": 256, "vocab": 100, "max_positions": 64, "tied_embeddings": true,
  "dropout": 0.0, "source": "test"}]})";
const std::string timing_default = R"({"gemm_efficiency": 0.7, "gemm_half_dim": 64, "fp32_gemm_efficiency": 0.85,
  "attention_efficiency": 0.4, "bandwidth_fraction": 0.8, "kernel_seconds": 4e-6, "step_seconds": 0, "foreach_tensor_seconds": 0})";
// The default entry: literature values, hf's context 3 bytes. x1's own entry: hf's timing and context, trainplan's
// context. x3's own entry: trainplan's timing.
const std::string calib = R"({"reference_gpu": "x1",
  "default": {"cuda_context_bytes": 1, "cublas_workspace_bytes": 2, "allocator_slack_fraction": 0.0,
    "safety_margin_fraction": 0.1, "source": "test",
    "profiles": {"hf": {"cuda_context_bytes": 3, "timing": )" + timing_default + R"(},
                 "llmc": {"timing": )" + timing_default + R"(}, "megatron": {"timing": )" + timing_default + R"(},
                 "trainplan": {"timing": )" + timing_default + R"(}}},
  "gpus": {"x1": {"profiles": {"hf": {"cuda_context_bytes": 11, "timing": {"gemm_efficiency": 0.8, "gemm_half_dim": 0,
                    "fp32_gemm_efficiency": 0.7, "attention_efficiency": 0.75, "bandwidth_fraction": 0.65,
                    "kernel_seconds": 0, "step_seconds": 0.0125, "foreach_tensor_seconds": 8.5e-5,
                    "forward_kernel_seconds": 3.4e-5, "backward_kernel_seconds": 3.6e-5}},
                  "trainplan": {"cuda_context_bytes": 13}}},
           "x3": {"profiles": {"trainplan": {"timing": {"gemm_efficiency": 0.55}}}}}})";

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto pos = s.find(from);
  REQUIRE(pos != std::string::npos);
  return s.replace(pos, from.size(), to);
}

}  // namespace

TEST_CASE("a GPU's compute capability and memory source are read, optional and checked", "[catalog]") {
  const catalog c = catalog::from_text(gpus, models, calib);
  CHECK(c.gpu("x1").capability == compute_capability{9, 0});
  CHECK(c.gpu("x3").capability == compute_capability{8, 0});
  CHECK(c.gpu("x1").memory_from == memory_source::measured);
  CHECK(c.gpu("x2").memory_from == memory_source::estimate);
  CHECK(c.gpu("x3").memory_from == memory_source::reported);
  // a user's gpus.json may leave both out
  CHECK_FALSE(c.gpu("x4").capability.known());
  CHECK(c.gpu("x4").memory_from == memory_source::unstated);
  CHECK(catalog::from_text(replace(gpus, "\"8.0\"", "\"10.0\""), models, calib).gpu("x3").capability == compute_capability{10, 0});
  for (const char* bad : {"9", "9.", ".0", "9.x", "0.5", "123.0", "9.0.1", "", "-9.0"}) {
    INFO(bad);
    CHECK_THROWS_WITH(catalog::from_text(replace(gpus, "\"8.0\"", "\"" + std::string(bad) + "\""), models, calib),
                      Catch::Contains("gpus.json: gpus[2]") && Catch::Contains("compute_capability"));
  }
  CHECK_THROWS_WITH(catalog::from_text(replace(gpus, "\"reported\"", "\"guessed\""), models, calib),
                    Catch::Contains("gpus.json: gpus[2]") && Catch::Contains("memory_source") && Catch::Contains("guessed"));
  CHECK_THROWS_WITH(catalog::from_text(gpus, models, replace(calib, "\"reference_gpu\": \"x1\"", "\"reference_gpu\": \"x9\"")),
                    Catch::Contains("calibration.json") && Catch::Contains("reference_gpu") && Catch::Contains("x9"));
}

TEST_CASE("every built-in GPU has its compute capability and says where its memory figure comes from", "[catalog]") {
  // NVIDIA's CUDA GPUs page (developer.nvidia.com/cuda-gpus): Hopper 9.0, Blackwell B200 10.0, Ampere A100 8.0 and
  // GA10x 8.6, Ada 8.9, Volta 7.0, Turing 7.5.
  const std::pair<const char*, compute_capability> expected[] = {
      {"h100", {9, 0}},     {"h100-pcie", {9, 0}}, {"h200", {9, 0}},     {"a100-40gb", {8, 0}}, {"a100-80gb", {8, 0}},
      {"b200", {10, 0}},    {"l40s", {8, 9}},      {"a10g", {8, 6}},     {"l4", {8, 9}},        {"rtx-4090", {8, 9}},
      {"rtx-3090", {8, 6}}, {"v100-16gb", {7, 0}}, {"v100-32gb", {7, 0}}, {"t4", {7, 5}}};
  for (const auto& [name, cc] : expected) {
    INFO(name);
    CHECK(data().gpu(name).capability == cc);
    CHECK(data().gpu(name).memory_from != memory_source::unstated);
  }
  CHECK(data().gpus().size() == std::size(expected));
  // Measured by trainplan: the H100's cudaMemGetInfo total, 85,017,493,504 B (tests/data/measurements/).
  CHECK(data().gpu("h100").memory_from == memory_source::measured);
  // Reported: PyTorch's out-of-memory message prints the total in GiB to two decimals; taken to the nearest MiB.
  // A100 80GB 79.14 GiB: 79.14 x 1024 = 81,039.36 -> 81,039 MiB; L40S 44.42 GiB: 45,486.08 -> 45,486 MiB.
  CHECK(data().gpu("a100-80gb").memory_from == memory_source::reported);
  CHECK(data().gpu("a100-80gb").memory_bytes == 81039ull << 20);
  CHECK(data().gpu("l40s").memory_bytes == 45486ull << 20);
  // Estimates: nvidia-smi's totals (H200 143,771 MiB), above what cudaMemGetInfo gives.
  CHECK(data().gpu("h200").memory_from == memory_source::estimate);
  CHECK(data().gpu("h200").memory_bytes == 143771ull << 20);
}

TEST_CASE("a GPU without measurements of its own takes the reference GPU's time constants and, on its architecture, its context",
          "[catalog]") {
  const catalog c = catalog::from_text(gpus, models, calib);
  const calibration x1 = c.calibration_for(c.gpu("x1"));
  CHECK(x1.timing_origin("hf") == calibration_origin::measured);
  CHECK(x1.context_origin("hf") == calibration_origin::measured);
  CHECK(x1.timing_origin("llmc") == calibration_origin::fallback);
  CHECK(x1.derived_from.empty());

  // x2, sm_90 like x1: hf's timing and both contexts are x1's.
  const calibration x2 = c.calibration_for(c.gpu("x2"));
  CHECK(x2.derived_from == "x1");
  CHECK(x2.timing_origin("hf") == calibration_origin::derived);
  CHECK(x2.timing("hf").gemm_efficiency == 0.8);
  CHECK(x2.timing("hf").forward_kernel_seconds == 3.4e-5);  // the host's cost per kernel carries over as it is
  CHECK(x2.timing("hf").step_seconds == 0.0125);
  CHECK(x2.context_bytes("hf") == 11);
  CHECK(x2.context_origin("hf") == calibration_origin::derived);
  CHECK(x2.context_bytes("trainplan") == 13);
  // x1 measured no trainplan timing and nothing of llmc's: the default entry's
  CHECK(x2.timing_origin("trainplan") == calibration_origin::fallback);
  CHECK(x2.timing("trainplan").gemm_efficiency == 0.7);
  CHECK(x2.timing_origin("llmc") == calibration_origin::fallback);

  // x3, sm_80: hf's timing is x1's, but not x1's contexts (other kernel images); its own trainplan timing stays.
  const calibration x3 = c.calibration_for(c.gpu("x3"));
  CHECK(x3.timing_origin("hf") == calibration_origin::derived);
  CHECK(x3.timing("hf").attention_efficiency == 0.75);
  CHECK(x3.context_bytes("hf") == 3);
  CHECK(x3.context_origin("hf") == calibration_origin::fallback);
  CHECK(x3.context_bytes("trainplan") == 1);
  CHECK(x3.timing_origin("trainplan") == calibration_origin::measured);
  CHECK(x3.timing("trainplan").gemm_efficiency == 0.55);
  // x4 does not say its compute capability: its context is never taken as x1's
  CHECK(c.calibration_for(c.gpu("x4")).context_origin("hf") == calibration_origin::fallback);
  CHECK(c.calibration_for(c.gpu("x4")).timing_origin("hf") == calibration_origin::derived);

  // Without a reference GPU every GPU keeps its own entry or the default.
  const catalog none = catalog::from_text(gpus, models, replace(calib, "\"reference_gpu\": \"x1\",", ""));
  CHECK(none.calibration_for(none.gpu("x2")).timing_origin("hf") == calibration_origin::fallback);
  CHECK(none.calibration_for(none.gpu("x2")).timing("hf").gemm_efficiency == 0.7);
  CHECK(none.calibration_for(none.gpu("x2")).derived_from.empty());
}

TEST_CASE("GEMM efficiencies not measured on a GPU follow its achievable matmul fraction over the reference GPU's", "[catalog][time]") {
  // x1 (the reference) reaches 80% of its datasheet's GEMM peak, x3 90%; x4 does not say.
  std::string with_fractions = replace(gpus, R"("compute_capability": "9.0", "memory_source": "measured", )",
                                       R"("compute_capability": "9.0", "memory_source": "measured", "matmul_achievable_fraction": 0.8, )");
  with_fractions = replace(with_fractions, R"("compute_capability": "8.0", "memory_source": "reported", )",
                           R"("compute_capability": "8.0", "memory_source": "reported", "matmul_achievable_fraction": 0.9, )");
  const catalog c = catalog::from_text(with_fractions, models, calib);
  const calibration x3 = c.calibration_for(c.gpu("x3"));
  CHECK(x3.matmul_scale == Approx(0.9 / 0.8));
  CHECK(x3.timing("hf").gemm_efficiency == Approx(0.8 * 0.9 / 0.8));      // x1's measured 0.8, derived
  CHECK(x3.timing("llmc").gemm_efficiency == Approx(0.7 * 0.9 / 0.8));    // the default entry's 0.7
  CHECK(x3.timing("trainplan").gemm_efficiency == 0.55);                   // measured on x3 itself: as it is
  CHECK(x3.timing("hf").attention_efficiency == 0.75);                     // GEMMs only
  CHECK(x3.timing("hf").fp32_gemm_efficiency == 0.7);
  // The reference itself, and a GPU that does not say, keep the figures as they are.
  CHECK(c.calibration_for(c.gpu("x1")).timing("llmc").gemm_efficiency == 0.7);
  CHECK(c.calibration_for(c.gpu("x4")).matmul_scale == 1);
  CHECK(c.calibration_for(c.gpu("x4")).timing("hf").gemm_efficiency == 0.8);
  // Never above 1: x1's 0.95 on a GPU that reaches 12.5% more is 1.
  const catalog high = catalog::from_text(with_fractions, models, replace(calib, R"("gemm_efficiency": 0.8, "gemm_half_dim": 0)",
                                                                          R"("gemm_efficiency": 0.95, "gemm_half_dim": 0)"));
  CHECK(high.calibration_for(high.gpu("x3")).timing("hf").gemm_efficiency == 1.0);
  // A fraction that is not one is refused, naming the field.
  try {
    (void)catalog::from_text(replace(with_fractions, "\"matmul_achievable_fraction\": 0.9", "\"matmul_achievable_fraction\": 1.5"),
                             models, calib);
    FAIL("accepted a fraction of 1.5");
  } catch (const input_error& e) {
    CHECK(std::string(e.what()).find("matmul_achievable_fraction") != std::string::npos);
  }
}

TEST_CASE("the H100's time constants make an A100's compute-bound GEMM slower by the datasheets' peak ratio, less the A100's better reach of its own", "[catalog][time]") {
  const gpu_spec& h100 = data().gpu("h100");
  const gpu_spec& a100 = data().gpu("a100-80gb");
  const calibration on_a100 = data().calibration_for(a100);
  REQUIRE(on_a100.timing_origin("hf") == calibration_origin::derived);
  REQUIRE(on_a100.derived_from == "h100");
  const timing_constants& k = on_a100.timing("hf");
  const timing_constants& on_h100 = data().calibration_for(h100).timing("hf");
  // ml-engineering's maximum achievable matmul FLOPS: A100 SXM 271.2 of 312 TFLOP/s, H100 SXM 794.5 of 989.
  const double reach_ratio = (271.2 / 312.0) / (794.5 / 989.0);
  CHECK(k.gemm_efficiency == Approx(on_h100.gemm_efficiency * reach_ratio).epsilon(2e-3));
  // An 8192^3 bf16 GEMM: 2 x 8192^3 FLOPs over 3 x 8192^2 x 2 bytes, compute-bound on both. Its time on the A100 over
  // its time on the H100 is the H100's dense bf16 peak over the A100's, 989.4 / 312 (the two datasheets), over the
  // ratio of what each reaches of its own peak.
  step_op gemm;
  gemm.cls = op_class::gemm;
  gemm.gemm_shaped = true;
  gemm.m = gemm.n = gemm.k = 8192;
  gemm.flops = 2.0 * 8192 * 8192 * 8192;
  gemm.bytes = 3.0 * 8192 * 8192 * 2;
  const double on_h100_s = op_device_seconds(gemm, *h100.peak_flops_per_s(dtype::bf16), h100.memory_bandwidth_bytes_per_s, on_h100);
  const double on_a100_s = op_device_seconds(gemm, *a100.peak_flops_per_s(dtype::bf16), a100.memory_bandwidth_bytes_per_s, k);
  CHECK(on_a100_s / on_h100_s == Approx(989.4 / 312.0 / reach_ratio).epsilon(2e-3));
  // The H200 shares the H100's compute capability: PyTorch's CUDA context measured on the H100 is its too.
  CHECK(data().calibration_for(data().gpu("h200")).context_origin("hf") == calibration_origin::derived);
  CHECK(data().calibration_for(data().gpu("h200")).context_bytes("hf") == data().calibration_for(h100).context_bytes("hf"));
  CHECK(on_a100.context_origin("hf") == calibration_origin::fallback);
}
