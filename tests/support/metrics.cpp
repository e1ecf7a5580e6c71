// Runs the real trainer binary and parses its metrics files.
#include "support/metrics.hpp"

#include <fstream>

namespace faultline::testing {

Records read_jsonl(const std::string& path) {
  Records records;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) records.push_back(nlohmann::json::parse(line));
  return records;
}

Records of_type(const Records& records, const std::string& type) {
  Records out;
  for (const auto& record : records)
    if (record.value("type", "") == type) out.push_back(record);
  return out;
}

std::vector<std::string> deterministic_steps(const Records& records) {
  std::vector<std::string> out;
  for (const auto& record : of_type(records, "step")) {
    nlohmann::json kept;
    for (const char* key :
         {"step", "loss", "grad_norm", "lr", "param_norm", "update_ratio", "tokens"})
      kept[key] = record.at(key);
    out.push_back(kept.dump());
  }
  return out;
}

TrainRun run_trainer(const TrainOptions& options) {
  TrainRun run;
  run.out_dir = options.out_dir.empty() ? make_temp_dir("train") : options.out_dir;
  const int port = free_port();
  std::vector<ProcessSpec> specs;
  for (int rank = 0; rank < options.ranks; ++rank) {
    ProcessSpec spec;
    spec.argv = {FAULTLINE_TRAIN_BIN, "-c", options.recipe, "--out", run.out_dir};
    for (const auto& assignment : options.overrides) {
      spec.argv.push_back("--set");
      spec.argv.push_back(assignment);
    }
    if (!options.resume.empty()) {
      spec.argv.push_back("--resume");
      spec.argv.push_back(options.resume);
    }
    for (const auto& arg : options.extra_args) spec.argv.push_back(arg);
    spec.env = {{"RANK", std::to_string(rank)},
                {"LOCAL_RANK", std::to_string(rank)},
                {"WORLD_SIZE", std::to_string(options.ranks)},
                {"MASTER_ADDR", "127.0.0.1"},
                {"MASTER_PORT", std::to_string(port)}};
    for (const auto& [name, value] : options.env) spec.env[name] = value;
    spec.timeout_s = options.timeout_s;
    specs.push_back(spec);
  }
  run.ranks = run_processes(specs);
  for (int rank = 0; rank < options.ranks; ++rank)
    run.metrics.push_back(
        read_jsonl(run.out_dir + "/metrics.rank" + std::to_string(rank) + ".jsonl"));
  return run;
}

}  // namespace faultline::testing
