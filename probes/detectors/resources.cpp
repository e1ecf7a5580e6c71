// Resource detectors: memory near its limit or growing steadily, a data loader that dominates
// the step, and a rank whose compute time is an outlier among the ranks.
#include <algorithm>
#include <cmath>
#include <map>

#include "common/text.hpp"
#include "probes/detectors/detectors.hpp"
#include "probes/detectors/stats.hpp"

namespace faultline::detectors {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string pct(double share) {
  return num(100 * share) + "%";
}

// "; also ranks 2, 3" for the other ranks that crossed the same line.
std::string also(const std::vector<int>& ranks, int reported) {
  std::vector<std::string> others;
  for (int rank : ranks)
    if (rank != reported) others.push_back(std::to_string(rank));
  return others.empty()
             ? ""
             : "; also rank" + std::string(others.size() > 1 ? "s " : " ") + join(others, ", ");
}

// memory: over max_fraction of the total at any step (streaming), or a leak: a least-squares
// slope of mem_bytes over steps above the limit with a good fit, after the first steps.
class MemoryDetector : public Detector {
 public:
  explicit MemoryDetector(const Thresholds& t) : t_(t.memory) {}

  void observe(const StepRecord& r) override {
    if (r.mem_bytes <= 0) return;  // a trainer that does not report memory
    Rank& s = ranks_[r.rank];
    const auto bytes = static_cast<double>(r.mem_bytes);
    if (r.mem_total_bytes && *r.mem_total_bytes > 0) {
      const auto total = static_cast<double>(*r.mem_total_bytes);
      if (bytes > t_.max_fraction * total)
        found_.offer({"memory", r.step, r.rank,
                      "mem_bytes " + mib(bytes) + " is " + pct(bytes / total) + " of " +
                          mib(total) + " (limit " + pct(t_.max_fraction) + ")"});
    }
    if (++s.records > t_.skip_steps) s.fit.add(static_cast<double>(r.step), bytes);
  }

  void judge(Findings& out, bool final) const override {
    out.merge(found_);
    if (!final) return;
    for (const auto& [rank, s] : ranks_) {
      const LinearFit& fit = s.fit;
      if (fit.count() < t_.min_steps) continue;
      const double slope = fit.slope(), r2 = fit.r2();
      if (!(slope > t_.max_growth_mib_per_step * kMiB) || !(r2 >= t_.min_r2)) continue;
      out.offer({"memory", static_cast<int64_t>(fit.first_x()), rank,
                 "mem_bytes grows " + num(slope / kMiB) + " MiB/step over steps " +
                     num(fit.first_x()) + ".." + num(fit.last_x()) + " (R^2 " + num(r2) + "; " +
                     mib(fit.first_y()) + " -> " + mib(fit.last_y()) + "; limit " +
                     num(t_.max_growth_mib_per_step) + " MiB/step)"});
    }
  }

 private:
  struct Rank {
    int64_t records = 0;
    LinearFit fit;
  };
  const Thresholds::Memory t_;
  std::map<int, Rank> ranks_;
  Findings found_;
};

// data_stall: the median share of the step spent waiting for data, per rank. A median so the
// first step's cold start does not decide it.
class DataStallDetector : public Detector {
 public:
  explicit DataStallDetector(const Thresholds& t) : t_(t.data_stall) {}

  void observe(const StepRecord& r) override {
    if (r.step_ms > 0 && std::isfinite(r.step_ms) && std::isfinite(r.data_ms))
      shares_[r.rank].push_back(std::clamp(r.data_ms / r.step_ms, 0.0, 1.0));
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
    out.offer({"data_stall", -1, worst,
               "rank " + std::to_string(worst) + " waits for data a median " + pct(worst_share) +
                   " of its step time over " + std::to_string(worst_steps) + " steps (limit " +
                   pct(t_.max_share) + ")" + also(flagged, worst)});
  }

 private:
  const Thresholds::DataStall t_;
  std::map<int, std::vector<double>> shares_;
};

// straggler: per rank, the median compute time (step minus communication and data wait: a
// fast rank waits in the collective for the slow one, so raw step times are all alike).
// score = reference / this rank's median, reference = the median of the other ranks' medians:
// the median of all ranks for large worlds, the other rank itself for two.
class StragglerDetector : public Detector {
 public:
  explicit StragglerDetector(const Thresholds& t) : t_(t.straggler) {}

  void observe(const StepRecord& r) override {
    Rank& s = ranks_[r.rank];
    if (++s.records <= t_.skip_steps) return;
    const double compute = r.step_ms - r.comm_ms - r.data_ms;
    if (std::isfinite(compute)) s.compute_ms.push_back(std::max(0.0, compute));
  }

  void judge(Findings& out, bool final) const override {
    if (!final) return;
    std::map<int, double> medians;
    for (const auto& [rank, s] : ranks_)
      if (static_cast<int64_t>(s.compute_ms.size()) >= t_.min_steps)
        medians[rank] = median(s.compute_ms);
    if (medians.size() < 2) return;
    std::vector<int> flagged;
    int worst = -1;
    double worst_score = 0, worst_ms = 0, worst_reference = 0;
    for (const auto& [rank, ms] : medians) {
      std::vector<double> others;
      for (const auto& [other, other_ms] : medians)
        if (other != rank) others.push_back(other_ms);
      const double reference = median(others);
      if (!(ms > 0) || !(reference > 0)) continue;  // no compute time to compare
      const double score = reference / ms;
      if (!(score < t_.min_score) || !(ms - reference >= t_.min_excess_ms)) continue;
      flagged.push_back(rank);
      if (worst < 0 || score < worst_score) {
        worst = rank;
        worst_score = score;
        worst_ms = ms;
        worst_reference = reference;
      }
    }
    if (worst < 0) return;
    out.offer({"straggler", -1, worst,
               "rank " + std::to_string(worst) + "'s median compute time " + num(worst_ms) +
                   " ms is " + num(worst_ms / worst_reference) + "x the other ranks' median " +
                   num(worst_reference) + " ms (score " + num(worst_score) + " < " +
                   num(t_.min_score) + ")" + also(flagged, worst)});
  }

 private:
  struct Rank {
    int64_t records = 0;
    std::vector<double> compute_ms;
  };
  const Thresholds::Straggler t_;
  std::map<int, Rank> ranks_;
};

}  // namespace

void add_resource_detectors(DetectorList& out, const Thresholds& t) {
  if (t.memory.enabled) out.push_back(std::make_unique<MemoryDetector>(t));
  if (t.data_stall.enabled) out.push_back(std::make_unique<DataStallDetector>(t));
  if (t.straggler.enabled) out.push_back(std::make_unique<StragglerDetector>(t));
}

}  // namespace faultline::detectors
