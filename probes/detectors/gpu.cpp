// The GPU detector: judges the CUPTI probe's gpu records joined with the steps (gpu_time.hpp).
// A GPU that sits idle while the step's data phase runs is data_stall evidence measured on the
// device; a rank whose NCCL kernels take far longer than its peers' is slow_comm.
#include <map>

#include "probes/detectors/detectors.hpp"
#include "probes/detectors/gpu_time.hpp"
#include "probes/detectors/stats.hpp"

namespace faultline::detectors {

namespace {

class GpuDetector : public Detector {
 public:
  explicit GpuDetector(const Thresholds& t) : stall_(t.data_stall), t_(t.gpu) {}

  void observe(const StepRecord& r) override { join_.add(r); }
  void observe(const GpuRecord& r) override { join_.add(r); }
  void observe(const EventRecord& r) override { join_.add(r); }

  void judge(Findings& out, bool final) const override {
    if (!final || !join_.has_gpu_records()) return;
    std::map<int, Rank> ranks;
    for (const StepGpuTime& s : join_.steps()) {
      Rank& rank = ranks[s.rank];
      rank.nccl_ms.push_back(s.nccl_ms);
      if (s.step_ms > 0) rank.idle_in_data.push_back(s.idle_in_data_ms / s.step_ms);
    }
    judge_data_idle(out, ranks);
    judge_nccl(out, ranks);
  }

 private:
  struct Rank {
    std::vector<double> nccl_ms, idle_in_data;  // per joined step
  };

  // The share of the step the GPU sat idle while data loaded: the device's own view of a stall.
  void judge_data_idle(Findings& out, const std::map<int, Rank>& ranks) const {
    if (!stall_.enabled) return;
    int worst = -1;
    double worst_share = 0;
    for (const auto& [rank, r] : ranks) {
      if (static_cast<int64_t>(r.idle_in_data.size()) < stall_.min_steps) continue;
      const double share = median(r.idle_in_data);
      if (share > stall_.max_share && share > worst_share) {
        worst = rank;
        worst_share = share;
      }
    }
    if (worst < 0) return;
    // Better evidence than the trainer's own data_ms: it is the device that waited.
    out.offer({FailureKind::DataStall, -1, worst,
               "rank " + std::to_string(worst) + "'s GPU sits idle while its data loads a median " +
                   num(100 * worst_share) + "% of the step over " +
                   std::to_string(ranks.at(worst).idle_in_data.size()) +
                   " steps (CUPTI gpu records; limit " + num(100 * stall_.max_share) + "%)"},
              -1);
  }

  void judge_nccl(Findings& out, const std::map<int, Rank>& ranks) const {
    if (!t_.enabled) return;
    std::map<int, double> medians;
    for (const auto& [rank, r] : ranks)
      if (static_cast<int64_t>(r.nccl_ms.size()) >= t_.min_steps) medians[rank] = median(r.nccl_ms);
    if (medians.size() < 2) return;
    int worst = -1;
    double worst_ms = 0, worst_peers = 0;
    for (const auto& [rank, ms] : medians) {
      std::vector<double> peers;
      for (const auto& [other, other_ms] : medians)
        if (other != rank) peers.push_back(other_ms);
      const double peer_ms = median(peers);
      if (ms >= t_.nccl_factor * peer_ms && ms - peer_ms >= t_.nccl_min_excess_ms &&
          ms - peer_ms > worst_ms - worst_peers) {
        worst = rank;
        worst_ms = ms;
        worst_peers = peer_ms;
      }
    }
    if (worst < 0) return;
    out.offer({FailureKind::SlowComm, -1, worst,
               "rank " + std::to_string(worst) + "'s NCCL kernels take a median " + num(worst_ms) +
                   " ms per step against its peers' " + num(worst_peers) +
                   " ms (CUPTI gpu records; limit " + num(t_.nccl_factor) + "x and +" +
                   num(t_.nccl_min_excess_ms) + " ms)"});
  }

  const Thresholds::DataStall stall_;
  const Thresholds::Gpu t_;
  GpuStepJoin join_;
};

}  // namespace

void add_gpu_detector(DetectorList& out, const Thresholds& t) {
  out.push_back(std::make_unique<GpuDetector>(t));
}

}  // namespace faultline::detectors
