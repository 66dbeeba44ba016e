#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "planner/io/catalog.hpp"
#include "planner/profiles/registry.hpp"
#include "planner/util/input_error.hpp"
#include "tests/support/test_helpers.hpp"
#include "tests/support/scratch_dir.hpp"

using namespace trainplan;
using namespace trainplan::test;

namespace {

const std::string one_gpu = R"({"gpus": [{"name": "x1", "aliases": [], "description": "X", "memory_bytes": 1000,
  "memory_bandwidth_bytes_per_s": 1e12, "host_link_bytes_per_s": 1e10,
  "peak_dense_tflops": {"fp32": 1, "tf32": null, "bf16": 2, "fp16": 2, "fp8": null}, "source": "test"}]})";
const std::string one_model = R"({"models": [{"name": "m1", "family": "gpt", "nominal_params": "1M", "layers": 2,
  "hidden": 64, "heads": 4, "kv_heads": 4, "ffn": 256, "vocab": 100, "max_positions": 64, "tied_embeddings": true,
  "dropout": 0.0, "source": "test"}]})";
const std::string calib = R"({"default": {"cuda_context_bytes": 1, "cublas_workspace_bytes": 2,
  "allocator_slack_fraction": 0.0, "safety_margin_fraction": 0.1, "source": "test",
  "profiles": {
    "hf": {"cuda_context_bytes": 3,
           "timing": {"gemm_efficiency": 0.5, "gemm_half_dim": 0, "fp32_gemm_efficiency": 0.9, "attention_efficiency": 0.4,
                      "bandwidth_fraction": 0.8, "kernel_seconds": 1e-5, "step_seconds": 0.01, "foreach_tensor_seconds": 1e-4}},
    "llmc": {"timing": {"gemm_efficiency": 0.7, "gemm_half_dim": 64, "fp32_gemm_efficiency": 0.85, "attention_efficiency": 0.4,
                        "bandwidth_fraction": 0.8, "kernel_seconds": 4e-6, "step_seconds": 0, "foreach_tensor_seconds": 0}},
    "megatron": {"timing": {"gemm_efficiency": 0.7, "gemm_half_dim": 64, "fp32_gemm_efficiency": 0.85, "attention_efficiency": 0.4,
                            "bandwidth_fraction": 0.8, "kernel_seconds": 4e-6, "step_seconds": 0, "foreach_tensor_seconds": 0}},
    "trainplan": {"timing": {"gemm_efficiency": 0.7, "gemm_half_dim": 64, "fp32_gemm_efficiency": 0.85, "attention_efficiency": 0.4,
                             "bandwidth_fraction": 0.8, "kernel_seconds": 4e-6, "step_seconds": 0, "foreach_tensor_seconds": 0}}}},
  "gpus": {"x1": {"cuda_context_bytes": 7, "profiles": {"hf": {"timing": {"kernel_seconds": 2e-5}}}}}})";

std::string replace(std::string s, const std::string& from, const std::string& to) {
  auto pos = s.find(from);
  REQUIRE(pos != std::string::npos);
  return s.replace(pos, from.size(), to);
}

}  // namespace

TEST_CASE("the built-in data has every GPU and preset the issue names", "[catalog]") {
  for (const char* g : {"h100", "h100-pcie", "h200", "a100-40gb", "a100-80gb", "b200", "l40s", "a10g", "l4", "rtx-4090",
                        "rtx-3090", "v100-16gb", "v100-32gb", "t4"}) {
    INFO(g);
    const gpu_spec& gpu = data().gpu(g);
    CHECK(gpu.memory_bytes > 8ull << 30);
    CHECK_FALSE(gpu.source.empty());
    CHECK(gpu.peak_flops_per_s(dtype::fp32).has_value());
  }
  for (const char* m : {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "gpt3-175b", "llama-2-7b", "llama-2-13b",
                        "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "mistral-7b", "tinyllama-1.1b",
                        "qwen2.5-0.5b", "qwen2.5-7b", "qwen2.5-72b", "llama-3.2-1b", "llama-3.2-3b", "gemma-2-9b",
                        "phi-3-mini"}) {
    INFO(m);
    CHECK_FALSE(data().model(m).spec.source.empty());
  }
  // GPU capacity is what CUDA reports as total (DESIGN.md): cudaMemGetInfo's total on an H100 80GB HBM3
  // was measured at 85,017,493,504 B (tests/data/measurements/), less than nvidia-smi's 81559 MiB.
  // Volta and Turing have no bf16.
  CHECK(data().gpu("h100").memory_bytes == 85017493504ull);
  CHECK(data().gpu("H100-SXM").name == "h100");
  CHECK_FALSE(data().gpu("v100-16gb").peak_flops_per_s(dtype::bf16).has_value());
  CHECK(data().gpu("h100").peak_flops_per_s(dtype::bf16) == Approx(989.4e12));
}

TEST_CASE("unknown names list what is known", "[catalog]") {
  CHECK_THROWS_WITH(data().gpu("h1000"), Catch::Contains("unknown GPU 'h1000'") && Catch::Contains("h100"));
  CHECK_THROWS_WITH(data().model("llama-9"), Catch::Contains("unknown model 'llama-9'") && Catch::Contains("gpt2"));
}

TEST_CASE("a model preset is found by its Hugging Face repository id, in any case, or its page URL", "[catalog]") {
  CHECK(data().model("meta-llama/Llama-3.1-8B").spec.name == "llama-3.1-8b");
  CHECK(data().model("qwen/qwen2.5-7b").spec.name == "qwen2.5-7b");
  CHECK(data().model("https://huggingface.co/mistralai/Mistral-7B-v0.1/").spec.name == "mistral-7b");
  CHECK(data().model("hf.co/openai-community/gpt2").spec.name == "gpt2");
  // every preset taken from a config.json names its repository, and that finds it
  for (const model_preset& p : data().models()) {
    INFO(p.spec.name);
    if (p.spec.source.starts_with("Hugging Face ")) REQUIRE_FALSE(p.hf_repo.empty());
    if (!p.hf_repo.empty()) CHECK(&data().model(p.hf_repo) == &p);
  }
  // an instruct variant is another repository: not taken for the base, and the error says what to do
  CHECK_THROWS_WITH(data().model("meta-llama/Llama-3.1-8B-Instruct"),
                    Catch::Contains("unknown model 'meta-llama/Llama-3.1-8B-Instruct'") && Catch::Contains("--hf-config"));
  const std::string with_repo = replace(one_model, "\"source\": \"test\"", "\"hf_repo\": \"Org/M1\", \"source\": \"test\"");
  CHECK(catalog::from_text(one_gpu, with_repo, calib).model("org/m1").spec.name == "m1");
  for (const char* bad : {"m1", "/m1", "org/", "a/b/c", "org/m 1"})
    CHECK_THROWS_WITH(catalog::from_text(one_gpu, replace(with_repo, "Org/M1", bad), calib),
                      Catch::Contains("models.json") && Catch::Contains("hf_repo"));
  // a repository that is also another preset's name would leave one of them unreachable
  const std::string entry = one_model.substr(std::string(R"({"models": [)").size(), one_model.size() - 14);  // the preset's object
  const std::string two = replace(with_repo, "}]}", "}, " + replace(entry, "\"m1\"", "\"org/m1\"") + "]}");
  CHECK_THROWS_WITH(catalog::from_text(one_gpu, two, calib), Catch::Contains("'org/m1' names two models"));
}

TEST_CASE("per-GPU calibration overrides the default key by key", "[catalog]") {
  catalog c = catalog::from_text(one_gpu, one_model, calib);
  calibration cal = c.calibration_for(c.gpu("x1"));
  CHECK(cal.cuda_context_bytes == 7);
  CHECK(cal.cublas_workspace_bytes == 2);
  CHECK(cal.timing("hf").gemm_efficiency == 0.5);
  CHECK(cal.timing("hf").kernel_seconds == 2e-5);  // the GPU's entry overrides one key
  CHECK(cal.timing("hf").step_seconds == 0.01);   // and keeps the others
  CHECK(data().calibration_for(data().gpu("a100-80gb")).cublas_workspace_bytes == 4u << 20);
  CHECK(data().calibration_for(data().gpu("h100")).cublas_workspace_bytes == 32u << 20);
}

TEST_CASE("data loading is strict: broken JSON, unknown and missing keys name the file and key", "[catalog]") {
  CHECK_THROWS_WITH(catalog::from_text("{", one_model, calib), Catch::Contains("gpus.json") && Catch::Contains("JSON"));
  CHECK_THROWS_WITH(catalog::from_text(replace(one_gpu, "\"source\": \"test\"", "\"source\": \"test\", \"colour\": 1"),
                                       one_model, calib),
                    Catch::Contains("gpus.json") && Catch::Contains("unknown key 'colour'"));
  CHECK_THROWS_WITH(catalog::from_text(replace(one_gpu, "\"memory_bytes\": 1000,", ""), one_model, calib),
                    Catch::Contains("missing key 'memory_bytes'"));
  CHECK_THROWS_WITH(catalog::from_text(one_gpu, replace(one_model, "\"layers\": 2", "\"layers\": -2"), calib),
                    Catch::Contains("models.json") && Catch::Contains("'layers'"));
  CHECK_THROWS_WITH(catalog::from_text(one_gpu, replace(one_model, "\"heads\": 4, \"kv_heads\": 4", "\"heads\": 3, \"kv_heads\": 3"), calib),
                    Catch::Contains("models.json"));
  CHECK_THROWS_WITH(catalog::from_text(one_gpu, one_model, replace(calib, "\"x1\"", "\"x9\"")),
                    Catch::Contains("calibration.json") && Catch::Contains("x9"));
  CHECK_THROWS_WITH(catalog::from_text(one_gpu, one_model, replace(calib, "\"gemm_efficiency\": 0.5", "\"gemm_efficiency\": 1.5")),
                    Catch::Contains("gemm_efficiency"));
  // A stack no profile is registered for, and a key its profile does not read.
  CHECK_THROWS_WITH(catalog::from_text(one_gpu, one_model, replace(calib, "\"llmc\": {", "\"jax\": {")),
                    Catch::Contains("calibration.json: default.profiles") && Catch::Contains("jax"));
  CHECK_THROWS_WITH(catalog::from_text(one_gpu, one_model, replace(calib, "\"llmc\": {", "\"llmc\": {\"cuda_context_bytes\": 5, ")),
                    Catch::Contains("default.profiles.llmc") && Catch::Contains("cuda_context_bytes"));
  CHECK_THROWS_AS(catalog::from_text(replace(one_gpu, "\"bf16\": 2", "\"bf16\": \"fast\""), one_model, calib), input_error);
}

TEST_CASE("a preset's Gemma 2 keys are optional, typed and checked", "[catalog]") {
  const std::string llama = replace(replace(replace(one_model, "\"gpt\"", "\"llama\""), "\"max_positions\": 64", "\"max_positions\": 0"),
                                    "\"tied_embeddings\": true", "\"tied_embeddings\": true, \"norms_per_layer\": 4, "
                                    "\"mlp_gate\": \"gelu_tanh\", \"sliding_window_tokens\": 16, \"sliding_window_global_every\": 2");
  const model_spec m = catalog::from_text(one_gpu, llama, calib).model("m1").spec;
  CHECK(m.norms_per_layer == 4);
  CHECK(m.mlp_gate == gate_activation::gelu_tanh);
  CHECK(m.sliding_layers() == 1);  // of 2 layers, layer 0 slides
  CHECK_THROWS_WITH(catalog::from_text(one_gpu, replace(llama, "\"gelu_tanh\"", "\"relu\""), calib),
                    Catch::Contains("models[0]") && Catch::Contains("mlp_gate"));
  CHECK_THROWS_WITH(catalog::from_text(one_gpu, replace(llama, "\"norms_per_layer\": 4", "\"norms_per_layer\": 5"), calib),
                    Catch::Contains("norms_per_layer"));
  CHECK_THROWS_WITH(catalog::from_text(one_gpu, replace(llama, "\"sliding_window_tokens\": 16", "\"sliding_window_tokens\": \"16\""), calib),
                    Catch::Contains("sliding_window_tokens"));
  // The gpt family has no sandwich norms.
  CHECK_THROWS_WITH(catalog::from_text(one_gpu, replace(one_model, "\"dropout\"", "\"norms_per_layer\": 4, \"dropout\""), calib),
                    Catch::Contains("gpt family"));
}

TEST_CASE("a --data-dir adds to and replaces built-in entries", "[catalog]") {
  catalog c = catalog::load(std::filesystem::path(TRAINPLAN_TEST_DATA) / "data_dir");
  CHECK(c.gpu("tiny-gpu").memory_bytes == 1073741824ull);
  CHECK(c.model("gpt2").spec.layers == 12);  // models.json not in the folder: built-in one kept
  CHECK_THROWS_AS(catalog::load(std::filesystem::path("/nonexistent/folder")), input_error);
}

TEST_CASE("a deeply nested calibration file is an input error, not a stack overflow", "[catalog]") {
  // Regression (issue 12, found beside fuzz/fuzz_catalog.cpp): a --data-dir calibration.json without a
  // "default" copied its "gpus" value, recursively, before refusing it; a million levels of nesting (2 MB,
  // far below the 64 MiB file limit) overflowed the stack.
  const std::size_t depth = 1'000'000;
  const std::string deep = "{\"gpus\": " + std::string(depth, '[') + std::string(depth, ']') + "}";
  catalog c = data();
  CHECK_THROWS_WITH(c.apply_calibration(deep, false), Catch::Contains("'gpus' must be an object"));
}

TEST_CASE("a name or alias that names two GPUs, or a model listed twice, is refused", "[catalog]") {
  // Regression (issue 12, fuzz/fuzz_catalog.cpp): gpu() returns the first match, so a second GPU under a
  // taken name or alias loaded but could never be chosen: --gpu picked the other one without a word.
  const std::string two = replace(one_gpu, "]}", ", " + replace(replace(one_gpu, "{\"gpus\": [", ""), "]}", "") + "]}");
  CHECK_THROWS_WITH(catalog::from_text(two, one_model, calib), Catch::Contains("'x1' names two GPUs"));
  const std::string alias_taken = replace(two, "\"name\": \"x1\", \"aliases\": []", "\"name\": \"x2\", \"aliases\": [\"X1\"]");
  CHECK_THROWS_WITH(catalog::from_text(alias_taken, one_model, calib), Catch::Contains("'x1' names two GPUs (x2 and x1)"));
  const std::string own_alias = replace(one_gpu, "\"aliases\": []", "\"aliases\": [\"x1\", \"x1\"]");
  CHECK(catalog::from_text(own_alias, one_model, calib).gpu("x1").name == "x1");  // its own name twice: one GPU
  const std::string twice = replace(one_model, "]}", ", " + replace(replace(one_model, "{\"models\": [", ""), "]}", "") + "]}");
  CHECK_THROWS_WITH(catalog::from_text(one_gpu, twice, calib), Catch::Contains("model 'm1' is listed twice"));

  // Across --data-dir: a new GPU named as a built-in GPU's alias.
  const auto dir = trainplan::test::scratch_dir("trainplan-catalog-alias");
  std::ofstream(dir / "gpus.json") << replace(one_gpu, "\"name\": \"x1\"", "\"name\": \"h100-sxm\"");
  CHECK_THROWS_WITH(catalog::load(dir), Catch::Contains("'h100-sxm' names two GPUs (h100 and h100-sxm)"));
  std::ofstream(dir / "gpus.json") << replace(one_gpu, "\"name\": \"x1\"", "\"name\": \"h100\"");
  CHECK(catalog::load(dir).gpu("h100").memory_bytes == 1000);  // the same name replaces the built-in entry
  std::filesystem::remove_all(dir);
}

TEST_CASE("timing efficiencies must be at least 0.001 and a preset's family names the file", "[catalog]") {
  // Audit: an attention_efficiency of 1e-320 loaded and made the step time infinite (the report printed nan).
  for (const char* key : {"gemm_efficiency", "fp32_gemm_efficiency", "attention_efficiency", "bandwidth_fraction"}) {
    INFO(key);
    const std::string entry = "{\"gpus\": {\"x1\": {\"profiles\": {\"hf\": {\"timing\": {\"" + std::string(key) + "\": ";
    catalog c = catalog::from_text(one_gpu, one_model, calib);
    CHECK_THROWS_WITH(c.apply_calibration(entry + "1e-320}}}}}}", false),
                      Catch::Contains("calibration.json: gpus.x1.profiles.hf.timing") && Catch::Contains(key) &&
                          Catch::Contains("must be within [0.001, 1]"));
    CHECK_THROWS_AS(c.apply_calibration(entry + "0}}}}}}", false), input_error);
    CHECK_NOTHROW(c.apply_calibration(entry + "0.001}}}}}}", false));
  }
  CHECK_THROWS_WITH(catalog::from_text(one_gpu, replace(one_model, "\"gpt\"", "\"bert\""), calib),
                    Catch::Contains("models.json: models[0]") && Catch::Contains("'family'") && Catch::Contains("bert") &&
                        !Catch::Contains("--family"));
}

TEST_CASE("the host's cost per launch is optional in calibration.json, and within range", "[catalog][time]") {
  // Absent (files written before the host and the GPU overlapped in the step time): 0, a host that never
  // holds the GPU back. Present: a number of seconds within [0, 1].
  catalog c = catalog::from_text(one_gpu, one_model, calib);
  CHECK(c.calibration_for(c.gpu("x1")).timing("hf").forward_kernel_seconds == 0);
  const std::string with_host = replace(calib, "\"kernel_seconds\": 2e-5", "\"kernel_seconds\": 2e-5, \"forward_kernel_seconds\": 3e-5, \"backward_kernel_seconds\": 1e-5");
  const calibration cal = catalog::from_text(one_gpu, one_model, with_host).calibration_for(c.gpu("x1"));
  CHECK(cal.timing("hf").forward_kernel_seconds == 3e-5);
  CHECK(cal.timing("hf").backward_kernel_seconds == 1e-5);
  CHECK(cal.timing("llmc").forward_kernel_seconds == 0);
  CHECK_THROWS_WITH(catalog::from_text(one_gpu, one_model, replace(calib, "\"kernel_seconds\": 2e-5", "\"kernel_seconds\": 2e-5, \"forward_kernel_seconds\": 5")),
                    Catch::Contains("forward_kernel_seconds must be within [0, 1]"));
  CHECK_THROWS_WITH(catalog::from_text(one_gpu, one_model, replace(calib, "\"kernel_seconds\": 2e-5", "\"kernel_seconds\": 2e-5, \"backward_kernel_seconds\": -1")),
                    Catch::Contains("backward_kernel_seconds"));
}
