#pragma once
// The GPUs, model presets, cluster presets and calibration the planner knows, loaded strictly from data/
// (embedded in the binary) or from a folder given with --data-dir. An unknown or missing key is an error that names the
// file and the key.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "planner/io/cluster_catalog.hpp"
#include "planner/system/calibration.hpp"
#include "planner/system/cluster.hpp"
#include "planner/system/gpu_spec.hpp"
#include "planner/model/model_spec.hpp"

namespace trainplan {

struct model_preset {
  model_spec spec;
  std::uint64_t nominal_params = 0;  // the size class in the name ("7B" -> 7e9)
  std::string nominal_text;
  std::string hf_repo;  // the Hugging Face repository of its config.json ("meta-llama/Llama-3.1-8B"); may be empty
};

class catalog {
 public:
  // Embedded data/, then the files of data_dir that exist: their entries are added, or replace built-in
  // entries of the same name (a calibration.json there overrides the keys it names).
  static catalog load(const std::optional<std::filesystem::path>& data_dir = std::nullopt);
  // Parses the documents directly (tests use this for malformed input); without clusters_json, no clusters.
  static catalog from_text(std::string_view gpus_json, std::string_view models_json, std::string_view calibration_json,
                           std::string_view clusters_json = {});

  const gpu_spec& gpu(std::string_view name) const;       // name or alias, case-insensitive
  // The entry whose device_names hold `device_name` (what CUDA calls the GPU, as a collector report's env line
  // does), or whose name or alias it is; case-insensitive. Null when none does.
  const gpu_spec* gpu_by_device_name(std::string_view device_name) const;
  // A preset's name or its Hugging Face repository id (also as a huggingface.co URL), case-insensitive.
  const model_preset& model(std::string_view name) const;
  const model_preset* find_model(std::string_view name) const;  // as model(), nullptr for an unknown name
  // model()'s refusal of an unknown name (the known ones, the closest of them and of more_candidates), with
  // `also` said before the closest.
  std::string unknown_model_message(std::string_view name, std::string_view also = {},
                                    const std::vector<std::string>& more_candidates = {}) const;
  // The GPU's constants: its own entry in calibration.json, or the default entry; what neither measured for a stack
  // the reference GPU's own entry fills in (calibration_origin::derived): its timing constants, and its CUDA context
  // for a GPU of the same compute capability.
  calibration calibration_for(const gpu_spec& gpu) const;
  // calibration.json's "reference_gpu" (empty: none).
  const std::string& reference_gpu() const;
  // A cluster preset by name, any case; an unknown name is refused naming `option`, the known ones and the closest.
  const cluster_spec& cluster(std::string_view name, std::string_view option = "--cluster") const;
  // The preset the GPU usually comes in (gpus.json "node"); nullptr when it has none.
  const cluster_spec* usual_cluster(const gpu_spec& gpu) const;

  const std::vector<gpu_spec>& gpus() const { return gpus_; }
  const std::vector<model_preset>& models() const { return models_; }
  const std::vector<cluster_spec>& clusters() const { return clusters_.clusters; }

  // A calibration.json's entries over these (as --data-dir applies one); throws input_error naming the
  // key for anything the loader rejects. `plan calibrate` reads back what it is about to write.
  void apply_calibration(std::string_view calibration_json, bool replace_default);
  // A clusters.json's entries over these (as --data-dir applies one); throws input_error for anything the loader
  // rejects. `plan calibrate --cluster-from` reads back what it is about to write.
  void apply_clusters(std::string_view clusters_json);

 private:

  // Each GPU's `cluster`: a copy of its usual node's preset (gpu_spec::cluster), after the clusters are resolved.
  void attach_usual_clusters();
  std::vector<std::string> gpu_names_and_aliases() const;  // for "did you mean"
  std::vector<gpu_spec> gpus_;
  std::vector<model_preset> models_;
  cluster_tables clusters_;
  calibration default_calibration_;
  std::vector<std::pair<std::string, calibration>> gpu_calibration_;  // gpu name -> default with overrides
  std::string reference_gpu_;  // calibration.json "reference_gpu": whose own entry fills in other GPUs' (calibration_for)
};

}  // namespace trainplan
