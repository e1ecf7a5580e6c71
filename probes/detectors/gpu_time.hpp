// The GPU's side of each step: the CUPTI probe's `gpu` records (interval figures in Unix time)
// joined with a rank's step records through its start events' `unix_time`. Pure and I/O-free.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "common/metrics_record.hpp"

namespace faultline::detectors {

// What the GPU did during one step of one rank, in ms. Intervals that straddle the step count
// pro rata, so the figures are as sharp as the probe's interval (FAULTLINE_CUPTI_INTERVAL_MS).
struct StepGpuTime {
  int rank = 0;
  int64_t step = 0;
  double step_ms = 0, data_ms = 0;
  double covered_ms = 0;  // how much of the step the gpu records cover
  double compute_ms = 0, nccl_ms = 0, idle_ms = 0;
  double idle_in_data_ms = 0;  // GPU idle while the step's data phase (its first data_ms) ran
};

class GpuStepJoin {
 public:
  // The instant a rank's record time `t` was `unix_time` (its start event), for the part of its
  // run that trains from `first_step` on: a run resumed from a checkpoint (a requeued job) has a
  // start event per part, each with a clock of its own.
  void anchor(int rank, double t, double unix_time, int64_t first_step = 0);
  // A rank's start event anchors it through its `unix_time` and `first_step`; other events, and a
  // start without `unix_time` (a trainer that does not write it), do nothing.
  void add(const EventRecord& event);
  // Placed in Unix time as it comes, through the rank's last anchor so far whose first step is
  // not after it: the current part when records stream in order, and the part that ran it last
  // when a store gives every start first and then the steps it kept (the last run of each). A
  // step before any anchor cannot be placed and is left out.
  void add(const StepRecord& step);
  void add(const GpuRecord& gpu);
  bool has_gpu_records() const { return !gpu_.empty(); }
  // Steps of ranks with an anchor and gpu records, each with some coverage; by rank, then step.
  std::vector<StepGpuTime> steps() const;

 private:
  struct Step {
    int64_t step;
    double unix_end, step_ms, data_ms;
  };
  struct Anchor {
    int64_t first_step;
    double t, unix_time;
  };
  // What the join needs of a gpu record, in 32 bytes instead of its 112: a day's job has
  // hundreds of thousands of intervals per rank, all held until the join.
  struct Interval {
    double unix_t0, unix_t1;
    float compute_ms, nccl_ms, idle_ms;
  };
  std::map<int, std::vector<Anchor>> anchors_;  // each rank's, in the order they came
  std::map<int, std::vector<Step>> steps_;
  std::map<int, std::vector<Interval>> gpu_;  // each rank's by unix_t0 (kept so as they come)
};

}  // namespace faultline::detectors
