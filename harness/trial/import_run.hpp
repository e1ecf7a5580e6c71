// `faultline import DIR`: a run faultline did not launch (a plain faultline-train run, a cluster
// job's output directory) stored as a run, judged by the same detectors, ready for
// `isolate --run`. Everything is read and checked before anything is stored: a missing or
// truncated file is a UserError naming it, and nothing half imported is kept.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/trial/trial.hpp"
#include "probes/detectors/thresholds.hpp"
#include "store/store.hpp"

namespace faultline::harness {

struct ImportRequest {
  std::string dir;  // holds metrics.rank<r>.jsonl for every rank
  int ranks = 0;    // 0: as many as there are metrics files (rank 0 upwards)
  detectors::Thresholds thresholds;
  std::vector<std::string> argv;  // the command that imported it, stored as the run's argv
};

struct ImportResult {
  int64_t run_id = 0;
  int ranks = 0;
  int64_t last_step = 0;
  int64_t checkpoints = 0;  // checkpoint events whose files were found
  Verdict verdict = Verdict::Pass;
  std::vector<detectors::Failure> failures;
  std::vector<MalformedLines> malformed;
};

ImportResult import_run(store::Store& store, const ImportRequest& request);

}  // namespace faultline::harness
