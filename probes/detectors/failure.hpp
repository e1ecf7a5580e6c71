// A judged failure and the collector that keeps, per kind, the earliest evidence of it: one
// Failure per kind and run is what the harness records and bisects on.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "probes/detectors/failure_kind.hpp"

namespace faultline::detectors {

struct Failure {
  FailureKind kind = FailureKind::Crash;
  int64_t step = -1;   // where it shows; -1: a property of the whole run (straggler, slow, ...)
  int rank = -1;       // the rank it was seen on; -1: not rank-specific
  std::string detail;  // the evidence, with its numbers
  // The step by which the evidence is complete, when later than `step` (a sustained run of
  // steps is dated by its first); -1: `step`. A prefix of the run must reach it to fail.
  int64_t shown_by = -1;
};

// The last step a run must reach to show `failure` (-1: not tied to a step).
inline int64_t evidence_step(const Failure& failure) {
  return failure.shown_by > failure.step ? failure.shown_by : failure.step;
}

// Whether `failure` is dated by the first of several steps that show it (a streak, a leak, a
// loss scaler's skips): no one step holds it, so there is no module or sample in a step to name.
inline bool spans_steps(const Failure& failure) {
  return failure.shown_by > failure.step;
}

// Whether any of `failures` fails the run (a warning alone does not).
bool any_failing(const std::vector<Failure>& failures);

// A run's failures in the order it is reported and stored: what fails the run before warnings,
// each by step (whole-run ones last), then kind. The first is what a run "failed with": a log
// that ends after a NaN is the NaN at step 150, then the stop at 151, not the other way round.
void order_for_report(std::vector<Failure>& failures);

// Failures after which the run's remaining steps prove nothing: the harness may stop the trial.
bool is_fatal(const Failure& failure);

// The Findings priority of a failure a bare step record shows: behind any anomaly record of the
// same step, which names a phase (priorities 0..4, dynamics.cpp).
constexpr int kStepRecordPriority = 5;

// Keeps one Failure per kind: the lowest step (whole-run ones after every step), then the lowest
// `priority` (better evidence first), then the lowest rank.
class Findings {
 public:
  void offer(Failure failure, int priority = 0);
  void merge(const Findings& other);
  bool has(FailureKind kind) const { return best_.count(kind) > 0; }
  // By step (whole-run failures last), then kind.
  std::vector<Failure> sorted() const;

 private:
  struct Entry {
    Failure failure;
    int priority = 0;
  };
  std::map<FailureKind, Entry> best_;
};

}  // namespace faultline::detectors
