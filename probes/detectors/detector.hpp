// The interface every stream detector implements, and what the judge knows about the run.
// Internal to probes/detectors: the harness uses RunJudge (run_judge.hpp).
#pragma once

#include <cstdint>

#include "common/metrics_record.hpp"
#include "probes/detectors/failure.hpp"

namespace faultline::detectors {

struct RunContext {
  int world_size = 0;         // 0: unknown; learned from "start" events and the ranks seen
  int64_t warmup_steps = -1;  // the LR schedule's warm-up; -1: unknown, inferred from the LR
  int64_t vocab_size = 0;     // a language model's vocabulary; 0: unknown (bad_init is off)
};

// Records arrive per rank in step order, ranks interleaved arbitrarily. A detector keeps state
// per rank and never assumes the ranks are in lockstep.
class Detector {
 public:
  virtual ~Detector() = default;
  virtual void observe(const StepRecord&) {}
  virtual void observe(const AnomalyRecord&) {}
  virtual void observe(const EventRecord&) {}
  virtual void observe(const GpuRecord&) {}
  // Adds what was found so far; with `final`, also the judgements that need the whole run.
  virtual void judge(Findings& out, bool final) const = 0;
};

}  // namespace faultline::detectors
