// StepThinner: keeps, per rank and bucket, one copy of each extreme record, replaced as better
// ones arrive, so memory is a few records per open bucket and per kept point.
#include "report/step_thinner.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "report/plot_data.hpp"

namespace faultline::report {

StepThinner::StepThinner(int64_t first_step, int64_t last_step, size_t buckets,
                         std::optional<int64_t> focus)
    : first_step_(first_step), focus_(focus) {
  const int64_t span = last_step - first_step + 1;
  const auto count = static_cast<int64_t>(buckets);
  keep_all_ = count <= 0 || span <= 2 * count;
  if (!keep_all_) width_ = (span + count - 1) / count;
}

void StepThinner::add(const StepRecord& record) {
  losses_[record.rank].push_back(record.loss);
  const int64_t seq = seq_++;
  if (keep_all_ || (focus_ && std::abs(record.step - *focus_) <= kFocusSteps)) {
    kept_.push_back({seq, 0, record});
    return;
  }
  const auto& metrics = plotted_metrics();
  Bucket& bucket = open_[record.rank];
  const int64_t index = std::max<int64_t>(0, (record.step - first_step_) / width_);
  if (bucket.index != index) {
    close(bucket);
    bucket.index = index;
    bucket.low.assign(metrics.size(), std::nullopt);
    bucket.high.assign(metrics.size(), std::nullopt);
    bucket.nonfinite.reset();
  }
  for (size_t m = 0; m < metrics.size(); ++m) {
    const auto value = metrics[m](record);
    if (!value) continue;
    if (!std::isfinite(*value)) {
      if (!bucket.nonfinite) bucket.nonfinite = Kept{seq, *value, record};
      continue;
    }
    if (!bucket.low[m] || *value < bucket.low[m]->value) bucket.low[m] = Kept{seq, *value, record};
    if (!bucket.high[m] || *value > bucket.high[m]->value)
      bucket.high[m] = Kept{seq, *value, record};
  }
}

void StepThinner::close(Bucket& bucket) {
  std::set<int64_t> taken;  // one record may be several metrics' extreme
  auto keep = [&](std::optional<Kept>& kept) {
    if (kept && taken.insert(kept->seq).second) kept_.push_back(std::move(*kept));
    kept.reset();
  };
  for (auto& low : bucket.low) keep(low);
  for (auto& high : bucket.high) keep(high);
  keep(bucket.nonfinite);
}

std::vector<double> StepThinner::rank_loss(int rank) const {
  if (losses_.empty()) return {};
  auto it = losses_.find(rank);
  return it != losses_.end() ? it->second : losses_.begin()->second;
}

std::vector<StepRecord> StepThinner::take() {
  for (auto& [rank, bucket] : open_) close(bucket);
  open_.clear();
  std::sort(kept_.begin(), kept_.end(), [](const Kept& a, const Kept& b) {
    return std::make_tuple(a.record.rank, a.record.step, a.seq) <
           std::make_tuple(b.record.rank, b.record.step, b.seq);
  });
  std::vector<StepRecord> records;
  records.reserve(kept_.size());
  for (auto& kept : kept_) records.push_back(std::move(kept.record));
  kept_.clear();
  return records;
}

}  // namespace faultline::report
