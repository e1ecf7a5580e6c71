// straggler: a rank whose compute time is longer than its peers' step after step. Judged per
// step against the other ranks (a paired sign test), not from one ratio of medians, so a rank the
// OS descheduled for a few steps, or for a time slice in each, is not called slow.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "probes/detectors/detectors.hpp"
#include "probes/detectors/stats.hpp"

namespace faultline::detectors {

namespace {

struct Sample {
  double wall_ms = 0;  // step_ms - comm_ms - data_ms: a fast rank waits in the collective
  std::optional<double> cpu_ms;
};

// What one rank's steps say against the other ranks' median at the same step.
struct Evidence {
  int64_t steps = 0, slower = 0;
  std::vector<double> own_wall, peer_wall, own_cpu, peer_cpu;
  double p_value = 1;
};

double median_of_others(const std::map<int, Sample>& at_step, int rank, bool cpu) {
  std::vector<double> others;
  for (const auto& [other, sample] : at_step)
    if (other != rank) others.push_back(cpu ? *sample.cpu_ms : sample.wall_ms);
  return median(others);
}

class StragglerDetector : public Detector {
 public:
  explicit StragglerDetector(const Thresholds& t) : t_(t.straggler) {}

  void observe(const StepRecord& r) override {
    if (++records_[r.rank] <= t_.skip_steps) return;
    if (!r.step_ms) return;  // a trainer that does not time its steps
    const double wall = *r.step_ms - r.comm_ms.value_or(0) - r.data_ms.value_or(0);
    if (!std::isfinite(wall)) return;
    Sample sample{std::max(0.0, wall), std::nullopt};
    if (r.cpu_ms && std::isfinite(*r.cpu_ms)) sample.cpu_ms = std::max(0.0, *r.cpu_ms);
    samples_[r.rank].push_back({r.step, sample});
  }

  void judge(Findings& out, bool final) const override {
    if (!final) return;
    const bool cpu = t_.clock == StragglerClock::Auto && every_sample_has_cpu_time();
    std::map<int, Evidence> ranks;
    for_each_step([&](const std::map<int, Sample>& at_step) {
      if (at_step.size() < 2) return;
      for (const auto& [rank, sample] : at_step) {
        Evidence& e = ranks[rank];
        const double own = cpu ? *sample.cpu_ms : sample.wall_ms;
        const double peers = median_of_others(at_step, rank, cpu);
        ++e.steps;
        if (peers < t_.min_score * own && own - peers >= t_.min_excess_ms) ++e.slower;
        e.own_wall.push_back(sample.wall_ms);
        e.peer_wall.push_back(median_of_others(at_step, rank, false));
        if (cpu) {
          e.own_cpu.push_back(own);
          e.peer_cpu.push_back(peers);
        }
      }
    });
    std::vector<int> flagged;
    int worst = -1;
    for (auto& [rank, e] : ranks) {
      if (e.steps < t_.min_steps) continue;
      // Under "no slower than its peers" a step counts with probability at most 1/2.
      e.p_value = binomial_upper_tail(e.slower, e.steps, 0.5);
      if (!(e.p_value <= t_.max_p_value)) continue;
      flagged.push_back(rank);
      if (worst < 0 || e.p_value < ranks.at(worst).p_value) worst = rank;
    }
    if (worst < 0) return;
    const Evidence& e = ranks.at(worst);
    std::string times = cpu ? "median CPU time " + num(median(e.own_cpu)) + " ms vs " +
                                  num(median(e.peer_cpu)) + " ms, wall " + num(median(e.own_wall)) +
                                  " ms vs " + num(median(e.peer_wall)) + " ms"
                            : "median wall time " + num(median(e.own_wall)) + " ms vs " +
                                  num(median(e.peer_wall)) + " ms (no cpu_ms compared)";
    out.offer({FailureKind::Straggler, -1, worst,
               "rank " + std::to_string(worst) + "'s compute took longer than the other ranks' " +
                   "median in " + std::to_string(e.slower) + " of " + std::to_string(e.steps) +
                   " steps (by over " + num(1 / t_.min_score) + "x and " + num(t_.min_excess_ms) +
                   " ms; sign test p " + num(e.p_value) + " <= " + num(t_.max_p_value) + "); " +
                   times + also_ranks(flagged, worst)});
  }

 private:
  bool every_sample_has_cpu_time() const {
    bool any = false;
    for (const auto& [rank, samples] : samples_)
      for (const auto& [step, sample] : samples) {
        if (!sample.cpu_ms) return false;
        any = true;
      }
    return any;
  }

  // Calls `visit` with each step's samples (rank -> sample), steps in order. A rank's samples
  // came in step order (a step written twice: the last one counts); the ranks are merged by
  // step, so no per-step map is kept while the run streams in.
  template <typename Visit>
  void for_each_step(Visit visit) const {
    struct Cursor {
      int rank;
      const std::vector<std::pair<int64_t, Sample>>& samples;
      size_t next = 0;
    };
    std::vector<Cursor> cursors;
    for (const auto& [rank, samples] : samples_) cursors.push_back({rank, samples});
    std::map<int, Sample> step_samples;
    while (true) {
      std::optional<int64_t> step;
      for (const auto& c : cursors)
        if (c.next < c.samples.size() && (!step || c.samples[c.next].first < *step))
          step = c.samples[c.next].first;
      if (!step) return;
      step_samples.clear();
      for (auto& c : cursors)
        while (c.next < c.samples.size() && c.samples[c.next].first == *step)
          step_samples[c.rank] = c.samples[c.next++].second;
      visit(step_samples);
    }
  }

  const Thresholds::Straggler t_;
  std::map<int, int64_t> records_;
  // rank -> (step, its compute time), as they came: 32 bytes a step, not a map node per step.
  std::map<int, std::vector<std::pair<int64_t, Sample>>> samples_;
};

}  // namespace

void add_straggler_detector(DetectorList& out, const Thresholds& t) {
  if (t.straggler.enabled) out.push_back(std::make_unique<StragglerDetector>(t));
}

}  // namespace faultline::detectors
