// What every run command shares: the store's path, the trainer binary, the work directory, the
// detector thresholds, and a SIGINT flag so an interrupted command leaves a consistent store.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "harness/trial.hpp"

namespace CLI {
class App;
}

namespace faultline::cli {

struct RunContextOptions {
  std::string db;         // --db, else FAULTLINE_DB, else ./faultline.db
  std::string trainer;    // --trainer, else FAULTLINE_TRAIN, else next to this binary
  std::string work_dir;   // --work-dir, else ./faultline-runs
  std::string detectors;  // --detectors, else recipes/detectors/default.toml when present
  double step_timeout_s = 60;
  double startup_s = 120;
  bool json = false;
};

// Adds --db, --trainer, --work-dir, --detectors, --step-timeout, --json to a subcommand.
void add_context_options(CLI::App& command, RunContextOptions& options);

std::string resolve_db_path(const std::string& flag);
std::string resolve_trainer(const std::string& flag);
harness::RunnerOptions runner_options(const RunContextOptions& options);

// Installs the SIGINT/SIGTERM handler (once) and returns the flag it sets.
const std::atomic<bool>* interrupt_flag();

}  // namespace faultline::cli
