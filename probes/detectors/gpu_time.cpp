// Joins gpu interval records with step windows by Unix time, pro rata per interval.
#include "probes/detectors/gpu_time.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/event_names.hpp"

namespace faultline::detectors {

namespace {
double overlap_s(double a0, double a1, double b0, double b1) {
  return std::max(0.0, std::min(a1, b1) - std::max(a0, b0));
}
}  // namespace

void GpuStepJoin::anchor(int rank, double t, double unix_time, int64_t first_step) {
  anchors_[rank].push_back({first_step, t, unix_time});
}

void GpuStepJoin::add(const EventRecord& event) {
  if (event.name != kStartEvent) return;
  const auto fields = nlohmann::json::parse(event.json, nullptr, false);
  if (!fields.is_object()) return;
  const auto unix_time = fields.find("unix_time");
  if (unix_time == fields.end() || !unix_time->is_number()) return;
  const auto first_step = fields.find("first_step");
  anchor(event.rank, event.t, unix_time->get<double>(),
         first_step != fields.end() && first_step->is_number_integer() ? first_step->get<int64_t>()
                                                                       : 0);
}

void GpuStepJoin::add(const StepRecord& step) {
  // A step's window is the step_ms before its record: a step without one has nothing to join.
  if (!step.step_ms) return;
  const auto anchors = anchors_.find(step.rank);
  if (anchors == anchors_.end()) return;
  const auto part =
      std::find_if(anchors->second.rbegin(), anchors->second.rend(),
                   [&](const Anchor& anchor) { return anchor.first_step <= step.step; });
  if (part == anchors->second.rend()) return;
  steps_[step.rank].push_back(
      {step.step, part->unix_time + (step.t - part->t), *step.step_ms, step.data_ms.value_or(0)});
}

void GpuStepJoin::add(const GpuRecord& gpu) {
  std::vector<Interval>& intervals = gpu_[gpu.rank];
  const Interval interval{gpu.unix_t0, gpu.unix_t1, static_cast<float>(gpu.compute_ms),
                          static_cast<float>(gpu.nccl_ms), static_cast<float>(gpu.idle_ms)};
  // A rank's records come in time order but for a late one: sorted as they come, no copy later.
  auto at = intervals.end();
  if (!intervals.empty() && interval.unix_t0 < intervals.back().unix_t0)
    at = std::upper_bound(intervals.begin(), intervals.end(), interval.unix_t0,
                          [](double t0, const Interval& other) { return t0 < other.unix_t0; });
  intervals.insert(at, interval);
}

std::vector<StepGpuTime> GpuStepJoin::steps() const {
  std::vector<StepGpuTime> out;
  for (const auto& [rank, steps] : steps_) {
    auto gpu_it = gpu_.find(rank);
    if (gpu_it == gpu_.end()) continue;
    const std::vector<Interval>& records = gpu_it->second;
    double longest = 0;
    for (const auto& r : records) longest = std::max(longest, r.unix_t1 - r.unix_t0);
    for (const Step& s : steps) {
      const double end = s.unix_end;
      const double start = end - s.step_ms / 1e3, data_end = start + s.data_ms / 1e3;
      StepGpuTime joined{rank, s.step, s.step_ms, s.data_ms};
      // Records start in order; one that starts before start - longest cannot reach the step.
      auto first = std::lower_bound(records.begin(), records.end(), start - longest,
                                    [](const Interval& r, double at) { return r.unix_t0 < at; });
      for (auto it = first; it != records.end() && it->unix_t0 < end; ++it) {
        const double length = it->unix_t1 - it->unix_t0;
        const double in_step = overlap_s(it->unix_t0, it->unix_t1, start, end);
        if (in_step <= 0) continue;
        const double share = in_step / length;
        joined.covered_ms += in_step * 1e3;
        joined.compute_ms += share * it->compute_ms;
        joined.nccl_ms += share * it->nccl_ms;
        joined.idle_ms += share * it->idle_ms;
        joined.idle_in_data_ms +=
            overlap_s(it->unix_t0, it->unix_t1, start, data_end) / length * it->idle_ms;
      }
      if (joined.covered_ms > 0) out.push_back(joined);
    }
  }
  return out;
}

}  // namespace faultline::detectors
