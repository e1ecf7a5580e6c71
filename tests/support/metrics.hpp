// Test support: run faultline-train (1..N ranks) on a recipe and read back its metrics JSONL.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/process.hpp"

namespace faultline::testing {

using Records = std::vector<nlohmann::json>;

Records read_jsonl(const std::string& path);
Records of_type(const Records& records, const std::string& type);

// The step fields that the determinism contract covers (not timings or memory), one string per
// step: equal strings mean bitwise-equal values.
std::vector<std::string> deterministic_steps(const Records& records);

struct TrainRun {
  std::string out_dir;
  std::vector<ProcessResult> ranks;
  std::vector<Records> metrics;  // per rank

  const ProcessResult& rank0() const { return ranks.at(0); }
  Records steps(int rank = 0) const { return of_type(metrics.at(rank), "step"); }
  Records anomalies(int rank = 0) const { return of_type(metrics.at(rank), "anomaly"); }
  Records events(int rank = 0) const { return of_type(metrics.at(rank), "event"); }
};

struct TrainOptions {
  std::string recipe = FAULTLINE_SOURCE_DIR "/tests/e2e/recipes/micro.toml";
  std::vector<std::string> overrides;
  int ranks = 1;
  std::string resume;
  std::string out_dir;  // empty: a fresh temp dir
  double timeout_s = 120;
  std::vector<std::string> extra_args;
  std::map<std::string, std::string> env;  // added to every rank's environment
};

TrainRun run_trainer(const TrainOptions& options);

}  // namespace faultline::testing
