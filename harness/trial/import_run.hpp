// `faultline import DIR`: a run faultline did not launch (a plain faultline-train run, a cluster
// job's output directory) stored as a run, judged by the same detectors, ready for
// `isolate --run`. Stored in one transaction: a missing or broken file is a UserError naming
// it, and nothing half imported is kept.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/contract/recipe.hpp"
#include "harness/trial/import_files.hpp"
#include "harness/trial/trial.hpp"
#include "probes/detectors/thresholds.hpp"
#include "store/store.hpp"

namespace faultline::harness {

struct ImportRequest {
  std::string dir;  // holds metrics.rank<r>.jsonl for every rank
  int ranks = 0;    // 0: as many as there are metrics files (rank 0 upwards)
  detectors::Thresholds thresholds;
  std::vector<std::string> argv;  // the command that imported it, stored as the run's argv
  // -c: the recipe of the user's own trainer that the run was started from (with its --set).
  // It becomes the run's config, so that `isolate --run` can launch that trainer again.
  std::optional<contract::Recipe> recipe;
  // --reference: healthy runs' steps (a stored reference) the run's loss is judged against.
  std::shared_ptr<const std::vector<std::vector<StepRecord>>> reference;
};

// Where an imported run's config, the one `isolate --run` relaunches, comes from.
enum class ImportedConfig {
  Bundled,  // faultline-train's own, from the start event
  Recipe,   // the command recipe given with -c
  Foreign,  // another trainer's config, and no recipe: stored and judged, not relaunchable
};
const char* to_string(ImportedConfig config);

struct ImportResult {
  int64_t run_id = 0;
  int ranks = 0;
  int64_t last_step = 0;
  int64_t checkpoints = 0;  // checkpoints a replay may start from (contract::checkpoints)
  // Paths several checkpoint events name with different steps: one file saved over each time
  // (nanoGPT's out/ckpt.pt), which holds its last step's state only.
  std::map<std::string, std::vector<int64_t>> saved_over;
  ImportedConfig config = ImportedConfig::Bundled;
  std::string trainer;  // what the start event says ran it (e.g. "python train.py")
  Verdict verdict = Verdict::Pass;
  std::vector<detectors::Failure> failures;
  std::vector<MalformedLines> malformed;
  std::vector<Restart> restarts;         // each rank's, in rank order
  std::vector<int64_t> earlier_imports;  // runs stored before from the same directory
  // Ranks whose end event says SIGTERM stopped them (a time limit, a cancel), not a crash.
  std::vector<int> terminated;
};

// The store is opened (open_store called) only once the run's files are found and its config
// read: an import refused for its input leaves no new store file behind.
using StoreOpener = std::function<store::Store&()>;
ImportResult import_run(const StoreOpener& open_store, const ImportRequest& request);
ImportResult import_run(store::Store& store, const ImportRequest& request);

// Whether a stored run was imported (its launcher is "import"), not launched by faultline.
bool is_imported(const store::RunInfo& run);

// Whether faultline can launch a stored run again: false for one imported without a recipe whose
// trainer is not faultline-train (its stored config is that trainer's own JSON, or none).
bool is_launchable_config(const store::RunInfo& run);

}  // namespace faultline::harness
