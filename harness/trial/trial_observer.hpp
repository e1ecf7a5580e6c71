// What a command may watch of a trial while it runs, for progress lines: its start (run id and
// where its logs go) and each step record. Called on the thread that runs the trial.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/metrics_record.hpp"

namespace faultline::harness {

struct TrialStart {
  int64_t run_id = 0;
  std::string out_dir;
  std::vector<std::string> logs;  // one per rank
  int ranks = 1;
  int64_t steps = 0;  // the steps this trial will run
};

class TrialObserver {
 public:
  virtual ~TrialObserver() = default;
  virtual void started(const TrialStart& start) = 0;
  virtual void step(const StepRecord& record) = 0;
};

}  // namespace faultline::harness
