// Progress of the long commands on stderr (stdout stays the answer, or one --json document):
// one live line redrawn in place on a terminal, plain lines when stderr is not one, nothing with
// --quiet. `train`, `smoke`, `repro` watch a trial's steps; `isolate` and `bisect` also show the
// phase, trial k of about n, time spent and an estimate of what is left.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "harness/isolate/isolate.hpp"
#include "harness/trial/trial_observer.hpp"

namespace faultline::cli {

enum class ProgressStyle { Live, Lines, Quiet };

// Live when stderr is a terminal, Lines otherwise; Quiet when asked.
ProgressStyle progress_style(bool quiet);

// The one place that writes progress: "faultline <command>: <text>".
class ProgressLine {
 public:
  ProgressLine(ProgressStyle style, std::string command);
  ~ProgressLine() { finish(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  ProgressStyle style() const { return style_; }
  // Live: redraws the line in place, at most ten times a second unless `Redraw::Now`.
  enum class Redraw { Throttled, Now };
  void live(const std::string& text, Redraw redraw = Redraw::Throttled);
  // A line that stays (Live and Lines); on a terminal it goes above the live line.
  void line(const std::string& text);
  void finish();  // ends the live line

 private:
  ProgressStyle style_;
  std::string command_;
  bool live_line_open_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

// How often a trial's steps show as plain lines: every tenth of the run (`train`), or never
// (commands that print their own line per trial).
enum class StepLines { EveryTenth, None };

// One trial's start and steps (rank 0's step, loss, lr, tokens/s); `prefix` leads the live line.
class TrialProgress : public harness::TrialObserver {
 public:
  TrialProgress(ProgressLine& out, StepLines lines) : out_(out), lines_(lines) {}
  void set_prefix(std::string prefix) { prefix_ = std::move(prefix); }
  void started(const harness::TrialStart& start) override;
  void step(const StepRecord& record) override;

 private:
  ProgressLine& out_;
  StepLines lines_;
  std::string prefix_;
  int ranks_ = 1;
  int64_t steps_ = 0;
};

// A search's progress (isolate, bisect steps|data|config): its phases and finished trials as
// lines, and on a terminal the running trial's step with time spent and an estimate left.
class SearchProgress : public harness::TrialObserver {
 public:
  explicit SearchProgress(ProgressLine& out)
      : out_(out), begun_(std::chrono::steady_clock::now()) {}
  void operator()(const harness::Progress& progress);  // the Isolator's ProgressSink
  void started(const harness::TrialStart& start) override;
  void step(const StepRecord& record) override;

 private:
  std::string status() const;  // "12.3 s spent, about 40.0 s left"
  ProgressLine& out_;
  std::chrono::steady_clock::time_point begun_;
  std::string phase_;
  int64_t trials_done_ = 0, expected_ = 0, steps_done_ = 0;
  int64_t trial_steps_ = 0;  // the running trial's length
};

}  // namespace faultline::cli
