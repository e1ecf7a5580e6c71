// RunJudge: the stream detectors over one trainer run's metrics records, fed as they arrive
// (the harness tails each rank's file while the ranks run). LibTorch-free and I/O-free.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "common/metrics_record.hpp"
#include "probes/detectors/detector.hpp"
#include "probes/detectors/detectors.hpp"
#include "probes/detectors/failure.hpp"
#include "probes/detectors/thresholds.hpp"

namespace faultline::detectors {

// How many steps before a failing step its kind's rules judge it against: a replay from a
// checkpoint shows the failure again only if it starts that many steps before it (loss_spike's
// median and rise rules judge a step once warmup_steps finite losses came before it). 0: the
// kind is judged at its step from that step's records alone, or from where a streak starts.
int64_t history_needed(FailureKind kind, const Thresholds& thresholds);

class RunJudge {
 public:
  explicit RunJudge(Thresholds thresholds = {}, RunContext context = {});

  void observe(const StepRecord& record);
  void observe(const AnomalyRecord& record);
  void observe(const EventRecord& record);
  void observe(const MetricsRecord& record);  // fingerprints carry nothing judged here

  // What the streaming detectors have found so far: nonfinite, data, grad_explode,
  // grad_vanish, loss_spike, lr_anomaly, memory over its limit. Cheap enough to call per record.
  std::vector<Failure> failures_so_far() const;
  // A failure so far after which the run proves nothing more (see is_fatal()).
  bool fatal() const;
  // Everything, including the whole-run judgements: stalled, memory growth, data_stall,
  // straggler. One Failure per kind, by step (whole-run ones last). No records: nothing.
  std::vector<Failure> finish() const;

  const Thresholds& thresholds() const { return thresholds_; }
  // The context's world size, or the largest a "start" event or the ranks seen say.
  int world_size() const;
  int64_t step_records() const { return step_records_; }
  // Sum over ranks of the "end" events' tokens_per_s: the run's throughput for compare_throughput.
  std::optional<double> tokens_per_s() const;

 private:
  std::vector<Failure> judge(bool final) const;

  Thresholds thresholds_;
  RunContext context_;
  DetectorList detectors_;
  int64_t step_records_ = 0;
  int max_rank_ = -1;
  int start_world_size_ = 0;
  std::map<int, double> tokens_per_s_;  // rank -> from its "end" event
};

}  // namespace faultline::detectors
