// Writes progress to stderr in the style the command line asked for.
#include "cli/progress.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>

#include "common/duration.hpp"
#include "common/text.hpp"

namespace faultline::cli {

ProgressStyle progress_style(bool quiet) {
  if (quiet) return ProgressStyle::Quiet;
  return isatty(STDERR_FILENO) ? ProgressStyle::Live : ProgressStyle::Lines;
}

ProgressLine::ProgressLine(ProgressStyle style, std::string command)
    : style_(style), command_(std::move(command)) {}

void ProgressLine::live(const std::string& text, Redraw redraw) {
  if (style_ != ProgressStyle::Live) return;
  const auto now = std::chrono::steady_clock::now();
  if (redraw == Redraw::Throttled && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  fmt::print(stderr, "\r\x1b[K{}", text);
  live_line_open_ = true;
}

void ProgressLine::line(const std::string& text) {
  if (style_ == ProgressStyle::Quiet) return;
  if (live_line_open_) fmt::print(stderr, "\r\x1b[K");
  live_line_open_ = false;
  fmt::print(stderr, "faultline {}: {}\n", command_, text);
}

void ProgressLine::finish() {
  if (live_line_open_) fmt::print(stderr, "\n");
  live_line_open_ = false;
}

void TrialProgress::started(const harness::TrialStart& start) {
  ranks_ = start.ranks;
  steps_ = start.steps;
  if (lines_ == StepLines::None) return;
  out_.line(fmt::format("run {}: {} rank(s) x {} steps; log {}", start.run_id, start.ranks,
                        start.steps, start.logs.empty() ? start.out_dir : start.logs.front()));
}

void TrialProgress::step(const StepRecord& record) {
  if (out_.style() == ProgressStyle::Quiet || record.rank != 0) return;
  // Every rank trains on the same number of tokens per step, so rank 0's rate × ranks is the run's.
  const double tokens_per_s =
      record.step_ms && *record.step_ms > 0 && record.tokens
          ? static_cast<double>(*record.tokens) * ranks_ * 1000.0 / *record.step_ms
          : 0;
  // What a trainer does not report (a log-only script's lr or tokens) is left out, not shown as 0.
  std::string line =
      fmt::format("{}step {}/{}  loss {}", prefix_, record.step, steps_, loss_text(record.loss));
  if (record.has_lr) line += fmt::format("  lr {:.3g}", record.lr);
  if (tokens_per_s > 0) line += fmt::format("  {:.0f} tokens/s", tokens_per_s);
  if (out_.style() == ProgressStyle::Lines) {
    const int64_t every = std::max<int64_t>(1, steps_ / 10);
    if (lines_ == StepLines::EveryTenth &&
        (record.step % every == 0 || record.step == steps_ || record.step == 1))
      out_.line(line);
    return;
  }
  out_.live(line,
            record.step == steps_ ? ProgressLine::Redraw::Now : ProgressLine::Redraw::Throttled);
}

std::string SearchProgress::status() const {
  const double spent =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begun_).count();
  std::string text = fmt::format("{} spent", format_seconds(spent));
  if (auto left = estimate_left(spent, trials_done_, expected_))
    text += fmt::format(", about {} left", format_seconds(*left));
  return text;
}

void SearchProgress::operator()(const harness::Progress& progress) {
  switch (progress.event) {
    case harness::ProgressEvent::PhaseStarted:
      phase_ = progress.phase;
      trials_done_ = 0;
      expected_ = 0;
      out_.line(progress.phase + " ...");
      return;
    case harness::ProgressEvent::Skipped:
      out_.line(progress.note);
      return;
    case harness::ProgressEvent::TrialDone:
      break;
  }
  phase_ = progress.phase;
  trials_done_ = progress.trial;
  expected_ = progress.expected_trials;
  steps_done_ = progress.steps;
  out_.line(fmt::format("{}: trial {} of ~{}: {}; {} trainer steps so far; {}", progress.phase,
                        progress.trial, progress.expected_trials, progress.note, progress.steps,
                        status()));
}

void SearchProgress::started(const harness::TrialStart& start) {
  trial_steps_ = start.steps;
  out_.live(fmt::format("{}: trial {} of ~{}: run {} starting; {} trainer steps so far; {}", phase_,
                        trials_done_ + 1, std::max(expected_, trials_done_ + 1), start.run_id,
                        steps_done_, status()),
            ProgressLine::Redraw::Now);
}

void SearchProgress::step(const StepRecord& record) {
  if (out_.style() != ProgressStyle::Live || record.rank != 0) return;
  out_.live(fmt::format("{}: trial {} of ~{}: step {}/{}; {} trainer steps so far; {}", phase_,
                        trials_done_ + 1, std::max(expected_, trials_done_ + 1), record.step,
                        trial_steps_, steps_done_, status()));
}

}  // namespace faultline::cli
