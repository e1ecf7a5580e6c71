// Progress of one `faultline train` run on stderr: the run id and log path at the start, then
// step, loss, lr and tokens/s: one live line on a terminal, a plain line every tenth of the run
// otherwise, nothing with --quiet.
#pragma once

#include <chrono>
#include <cstdint>

#include "harness/trial/trial_observer.hpp"

namespace faultline::cli {

enum class ProgressStyle { Live, Lines, Quiet };

// Live when stderr is a terminal, Lines otherwise; Quiet when asked.
ProgressStyle progress_style(bool quiet);

class TrainProgress : public harness::TrialObserver {
 public:
  explicit TrainProgress(ProgressStyle style) : style_(style) {}
  void started(const harness::TrialStart& start) override;
  void step(const StepRecord& record) override;
  void finish();  // ends the live line

 private:
  ProgressStyle style_;
  int ranks_ = 1;
  int64_t steps_ = 0;
  bool live_line_open_ = false;
  std::chrono::steady_clock::time_point last_print_{};
};

}  // namespace faultline::cli
