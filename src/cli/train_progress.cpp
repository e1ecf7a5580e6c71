// Formats the progress of a run from rank 0's step records.
#include "cli/train_progress.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>

namespace faultline::cli {

ProgressStyle progress_style(bool quiet) {
  if (quiet) return ProgressStyle::Quiet;
  return isatty(STDERR_FILENO) ? ProgressStyle::Live : ProgressStyle::Lines;
}

void TrainProgress::started(const harness::TrialStart& start) {
  ranks_ = start.ranks;
  steps_ = start.steps;
  if (style_ == ProgressStyle::Quiet) return;
  fmt::print(stderr, "faultline train: run {}: {} rank(s) x {} steps; log {}\n", start.run_id,
             start.ranks, start.steps, start.logs.empty() ? start.out_dir : start.logs.front());
}

void TrainProgress::step(const StepRecord& record) {
  if (style_ == ProgressStyle::Quiet || record.rank != 0) return;
  // Every rank trains on the same number of tokens per step, so rank 0's rate × ranks is the run's.
  const double tokens_per_s =
      record.step_ms > 0 ? record.tokens * ranks_ * 1000.0 / record.step_ms : 0;
  const std::string line = fmt::format("step {}/{}  loss {:.4f}  lr {:.3g}  {:.0f} tokens/s",
                                       record.step, steps_, record.loss, record.lr, tokens_per_s);
  if (style_ == ProgressStyle::Lines) {
    const int64_t every = std::max<int64_t>(1, steps_ / 10);
    if (record.step % every == 0 || record.step == steps_ || record.step == 1)
      fmt::print(stderr, "faultline train: {}\n", line);
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (record.step != steps_ && now - last_print_ < std::chrono::milliseconds(100)) return;
  last_print_ = now;
  fmt::print(stderr, "\r\x1b[K{}", line);
  live_line_open_ = true;
}

void TrainProgress::finish() {
  if (live_line_open_) fmt::print(stderr, "\n");
  live_line_open_ = false;
}

}  // namespace faultline::cli
