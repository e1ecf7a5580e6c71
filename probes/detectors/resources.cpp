// Resource detectors: memory near its limit or growing steadily, and a data loader that dominates
// the step (stragglers: straggler.cpp).
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "probes/detectors/detectors.hpp"
#include "probes/detectors/stats.hpp"

namespace faultline::detectors {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string pct(double share) {
  return num(100 * share) + "%";
}

// memory: over max_fraction of the total at any step (streaming), or a leak: a least-squares
// slope of mem_bytes over steps above the limit with a good fit, after the first steps.
class MemoryDetector : public Detector {
 public:
  explicit MemoryDetector(const Thresholds& t) : t_(t.memory) {}

  void observe(const StepRecord& r) override {
    if (!r.mem_bytes || *r.mem_bytes <= 0) return;  // a trainer that does not report memory
    Rank& s = ranks_[r.rank];
    const auto bytes = static_cast<double>(*r.mem_bytes);
    if (r.mem_total_bytes && *r.mem_total_bytes > 0) {
      const auto total = static_cast<double>(*r.mem_total_bytes);
      if (bytes > t_.max_fraction * total)
        found_.offer({FailureKind::Memory, r.step, r.rank,
                      "mem_bytes " + mib(bytes) + " is " + pct(bytes / total) + " of " +
                          mib(total) + " (limit " + pct(t_.max_fraction) + ")"});
    }
    if (++s.records > t_.skip_steps) {
      s.fit.add(static_cast<double>(r.step), bytes);
      if (!s.first_leaking && leaking(s.fit)) s.first_leaking = r.step;
    }
  }

  void judge(Findings& out, bool final) const override {
    out.merge(found_);
    if (!final) return;
    for (const auto& [rank, s] : ranks_) {
      const LinearFit& fit = s.fit;
      if (!leaking(fit)) continue;
      const double slope = fit.slope(), r2 = fit.r2();
      // A prefix of the run shows the leak once its fit did, with as many steps again to
      // spare (a replay's memory figures are not bitwise): not at the first fitted step.
      const auto last = static_cast<int64_t>(fit.last_x());
      const int64_t shown_by =
          s.first_leaking ? std::min(last, *s.first_leaking + t_.min_steps) : last;
      out.offer({FailureKind::Memory, static_cast<int64_t>(fit.first_x()), rank,
                 "mem_bytes grows " + num(slope / kMiB) + " MiB/step over steps " +
                     num(fit.first_x()) + ".." + num(fit.last_x()) + " (R^2 " + num(r2) + "; " +
                     mib(fit.first_y()) + " -> " + mib(fit.last_y()) + "; limit " +
                     num(t_.max_growth_mib_per_step) + " MiB/step)",
                 shown_by});
    }
  }

 private:
  struct Rank {
    int64_t records = 0;
    LinearFit fit;
    std::optional<int64_t> first_leaking;  // the first step the fit so far met the leak rule
  };

  bool leaking(const LinearFit& fit) const {
    return fit.count() >= t_.min_steps && fit.slope() > t_.max_growth_mib_per_step * kMiB &&
           fit.r2() >= t_.min_r2;
  }

  const Thresholds::Memory t_;
  std::map<int, Rank> ranks_;
  Findings found_;
};

// data_stall: the median share of the step spent waiting for data, per rank, out of the step's own
// time outside the collective: a rank that waits in the all-reduce for a slow peer is not the
// faster for it. A median so the first step's cold start does not decide it.
class DataStallDetector : public Detector {
 public:
  explicit DataStallDetector(const Thresholds& t) : t_(t.data_stall) {}

  void observe(const StepRecord& r) override {
    if (!r.step_ms || !r.data_ms) return;  // a trainer that does not time its data loading
    const double own_ms = *r.step_ms - r.comm_ms.value_or(0);
    if (own_ms > 0 && std::isfinite(own_ms) && std::isfinite(*r.data_ms))
      shares_[r.rank].push_back(std::clamp(*r.data_ms / own_ms, 0.0, 1.0));
  }

  void judge(Findings& out, bool final) const override {
    if (!final) return;
    std::vector<int> flagged;
    int worst = -1;
    double worst_share = 0;
    size_t worst_steps = 0;
    for (const auto& [rank, shares] : shares_) {
      if (static_cast<int64_t>(shares.size()) < t_.min_steps) continue;
      const double share = median(shares);
      if (!(share > t_.max_share)) continue;
      flagged.push_back(rank);
      if (worst < 0 || share > worst_share) {
        worst = rank;
        worst_share = share;
        worst_steps = shares.size();
      }
    }
    if (worst < 0) return;
    out.offer({FailureKind::DataStall, -1, worst,
               "rank " + std::to_string(worst) + " waits for data a median " + pct(worst_share) +
                   " of its step time outside the collective over " + std::to_string(worst_steps) +
                   " steps (limit " + pct(t_.max_share) + ")" + also_ranks(flagged, worst)});
  }

 private:
  const Thresholds::DataStall t_;
  std::map<int, std::vector<double>> shares_;
};

}  // namespace

void add_resource_detectors(DetectorList& out, const Thresholds& t) {
  if (t.memory.enabled) out.push_back(std::make_unique<MemoryDetector>(t));
  if (t.data_stall.enabled) out.push_back(std::make_unique<DataStallDetector>(t));
}

}  // namespace faultline::detectors
