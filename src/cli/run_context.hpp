// What every run command shares: the store's path, the trainer binary, the work directory, the
// detector thresholds, and a SIGINT flag so an interrupted command leaves a consistent store.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "harness/trial.hpp"
#include "store/store.hpp"

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

// Opens the store and marks runs whose owner process on this host is gone as interrupted (a
// faultline killed with SIGKILL cannot do it itself); their rows are kept.
store::Store open_store(const RunContextOptions& options);

// What decides a trial's verdict besides its spec: the detector thresholds and timeouts. Part
// of every cached trial's identity.
std::string judge_identity(const RunContextOptions& options);

// Installs the SIGINT/SIGTERM handler (once) and returns the flag it sets.
const std::atomic<bool>* interrupt_flag();

}  // namespace faultline::cli
