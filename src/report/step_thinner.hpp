// A long run's step records thinned, as they are read, to the ones its plots draw, so that the
// report of a big job never holds all of them (8 ranks × 100k steps: 298 MiB before,
// docs/report.md).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "common/metrics_record.hpp"

namespace faultline::report {

// Per rank and bucket of steps: the records with each plotted metric's lowest and highest value
// and the first one with a non-finite value. The plots draw each bucket's extremes (StepBuckets),
// so the kept records draw what all of them would. Each rank's loss is kept whole, for the
// sparkline (a mean per character).
class StepThinner {
 public:
  // Steps first..last cut into `buckets` buckets of equal width. A span of at most 2 × buckets
  // steps keeps every record; so do the records within kFocusSteps of `focus` (the bad step,
  // which the plots draw step by step).
  StepThinner(int64_t first_step, int64_t last_step, size_t buckets,
              std::optional<int64_t> focus = std::nullopt);

  // Records of a rank in its step order; ranks may interleave.
  void add(const StepRecord& record);

  // The kept records, by rank, then step, then arrival.
  std::vector<StepRecord> take();
  // The loss by step of `rank` (the rank a failure is on) when the records hold it, else of the
  // lowest rank: a peer stopped before its bad step (killed once the failing rank had exited)
  // would show a curve without it. Every record's, thinned or not.
  std::vector<double> rank_loss(int rank = -1) const;

 private:
  struct Kept {
    int64_t seq = 0;
    double value = 0;
    StepRecord record;
  };
  struct Bucket {
    int64_t index = -1;
    std::vector<std::optional<Kept>> low, high;  // per plotted metric
    std::optional<Kept> nonfinite;
  };
  void close(Bucket& bucket);

  int64_t first_step_ = 0, width_ = 1;
  std::optional<int64_t> focus_;
  bool keep_all_ = true;
  int64_t seq_ = 0;
  std::map<int, Bucket> open_;  // per rank
  std::vector<Kept> kept_;
  std::map<int, std::vector<double>> losses_;
};

}  // namespace faultline::report
