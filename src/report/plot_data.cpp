// Step records → plot lines → the page's JSON.
#include "report/plot_data.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace faultline::report {

using nlohmann::json;

const char* to_string(SeriesRole role) {
  switch (role) {
    case SeriesRole::Subject:
      return "subject";
    case SeriesRole::Replay:
      return "replay";
    case SeriesRole::Reference:
      return "reference";
    case SeriesRole::BandLow:
      return "band_low";
    case SeriesRole::BandHigh:
      return "band_high";
  }
  return "subject";
}

namespace {

std::optional<double> loss_of(const StepRecord& r) {
  return r.loss;
}
std::optional<double> grad_norm_of(const StepRecord& r) {
  // A step the loss scaler skipped has the overflow's norm: not a point of the curve.
  return r.has_grad_norm && !r.skipped ? std::optional<double>(r.grad_norm) : std::nullopt;
}
std::optional<double> loss_scale_of(const StepRecord& r) {
  return r.loss_scale;
}
std::optional<double> lr_of(const StepRecord& r) {
  return r.has_lr ? std::optional<double>(r.lr) : std::nullopt;
}
std::optional<double> compute_ms_of(const StepRecord& r) {
  if (!r.step_ms) return std::nullopt;
  return std::max(0.0, *r.step_ms - r.data_ms.value_or(0) - r.comm_ms.value_or(0));
}
std::optional<double> data_ms_of(const StepRecord& r) {
  return r.data_ms;
}
std::optional<double> comm_ms_of(const StepRecord& r) {
  return r.comm_ms;
}
std::optional<double> memory_mib_of(const StepRecord& r) {
  return r.mem_bytes && *r.mem_bytes > 0
             ? std::optional<double>(static_cast<double>(*r.mem_bytes) / 1048576)
             : std::nullopt;
}

std::vector<int> ranks_of(const std::vector<StepRecord>& steps) {
  std::set<int> ranks;
  for (const auto& record : steps) ranks.insert(record.rank);
  return {ranks.begin(), ranks.end()};
}

Series series_of(const std::vector<StepRecord>& steps, int rank, const Metric& metric,
                 std::string label, SeriesRole role) {
  Series series{std::move(label), role, {}, {}};
  for (const auto& record : steps) {
    if (record.rank != rank) continue;
    if (auto value = metric(record)) {
      series.steps.push_back(record.step);
      series.values.push_back(*value);
    }
  }
  return series;
}

// One line per rank of the subject (labelled by rank when it has several), one per other run.
Plot per_rank_plot(std::string id, std::string title, std::string unit, const Curves& subject,
                   const std::vector<Curves>& others, const Metric& metric) {
  Plot plot{std::move(id), std::move(title), std::move(unit), {}};
  const auto ranks = ranks_of(subject.steps);
  for (int rank : ranks) {
    std::string label =
        ranks.size() > 1 ? subject.label + " · rank " + std::to_string(rank) : subject.label;
    plot.series.push_back(series_of(subject.steps, rank, metric, label, subject.role));
  }
  for (const auto& other : others) {
    const auto other_ranks = ranks_of(other.steps);
    if (!other_ranks.empty())
      plot.series.push_back(
          series_of(other.steps, other_ranks.front(), metric, other.label, other.role));
  }
  return plot;
}

// The x axis of a plot, and each line on it. A short run's axis is every step. A long run's
// (more than 2 × `count` steps) is cut into `count` buckets of steps, each drawn at its first and
// last step: each line's lowest and highest value in the bucket, in the order they came, so a
// one-step spike stays visible and a bucket holds 2 points, not thousands. (The plots of an
// imported 8-rank, 100k-step run were 66 MB of HTML.) Steps in `focus` (around the bad step)
// are buckets of one step each: zooming in there shows every step.
class StepBuckets {
 public:
  StepBuckets(const std::vector<int64_t>& axis, size_t count,
              std::optional<std::pair<int64_t, int64_t>> focus)
      : axis_(axis) {
    if (axis.size() <= 2 * count) return;
    for (size_t b = 0; b <= count; ++b) begin_.push_back(b * axis.size() / count);
    if (focus) {
      for (size_t i = index_of(focus->first); i < axis.size() && axis[i] <= focus->second; ++i)
        begin_.push_back(i);
      std::sort(begin_.begin(), begin_.end());
      begin_.erase(std::unique(begin_.begin(), begin_.end()), begin_.end());
    }
  }

  json x() const {
    if (begin_.empty()) return axis_;
    json x = json::array();
    for (size_t b = 0; b + 1 < begin_.size(); ++b) {
      x.push_back(axis_[begin_[b]]);
      if (begin_[b + 1] - begin_[b] > 1) x.push_back(axis_[begin_[b + 1] - 1]);
    }
    return x;
  }

  // The line's values on x() (null where it has none) and its non-finite steps (with buckets,
  // the first of each bucket).
  std::pair<json, json> line(const Series& series) const {
    json nonfinite = json::array();
    if (begin_.empty()) {
      json values(axis_.size(), nullptr);
      for (size_t i = 0; i < series.steps.size(); ++i) {
        if (std::isfinite(series.values[i]))
          values[index_of(series.steps[i])] = series.values[i];
        else
          nonfinite.push_back(series.steps[i]);
      }
      return {values, nonfinite};
    }
    struct Extremes {
      std::optional<size_t> low, high;  // indices into the series
      bool nonfinite = false;
    };
    std::vector<Extremes> in(begin_.size() - 1);
    for (size_t i = 0; i < series.steps.size(); ++i) {
      const size_t at = index_of(series.steps[i]);
      Extremes& bucket = in[static_cast<size_t>(std::upper_bound(begin_.begin(), begin_.end(), at) -
                                                begin_.begin() - 1)];
      const double value = series.values[i];
      if (!std::isfinite(value)) {
        if (!bucket.nonfinite) nonfinite.push_back(series.steps[i]);
        bucket.nonfinite = true;
        continue;
      }
      if (!bucket.low || value < series.values[*bucket.low]) bucket.low = i;
      if (!bucket.high || value > series.values[*bucket.high]) bucket.high = i;
    }
    json values = json::array();
    for (size_t b = 0; b < in.size(); ++b) {
      const bool one_step = begin_[b + 1] - begin_[b] == 1;
      if (!in[b].low) {
        values.push_back(nullptr);
        if (!one_step) values.push_back(nullptr);
        continue;
      }
      const auto [first, second] = std::minmax(*in[b].low, *in[b].high);
      values.push_back(series.values[first]);
      if (!one_step) values.push_back(series.values[second]);
    }
    return {values, nonfinite};
  }

 private:
  size_t index_of(int64_t step) const {
    return static_cast<size_t>(std::lower_bound(axis_.begin(), axis_.end(), step) - axis_.begin());
  }

  const std::vector<int64_t>& axis_;
  std::vector<size_t> begin_;  // each bucket's first index into the axis, then the axis' size
};

bool has_values(const Plot& plot) {
  return std::any_of(plot.series.begin(), plot.series.end(),
                     [](const Series& series) { return !series.values.empty(); });
}

}  // namespace

Band loss_band(const std::string& label, const std::vector<std::vector<StepRecord>>& runs) {
  std::map<int64_t, std::pair<double, double>> spread;
  std::map<int64_t, size_t> seen;
  for (const auto& run : runs) {
    const auto ranks = ranks_of(run);
    if (ranks.empty()) continue;
    for (const auto& record : run) {
      if (record.rank != ranks.front() || !std::isfinite(record.loss)) continue;
      auto [at, fresh] = spread.try_emplace(record.step, record.loss, record.loss);
      if (!fresh) {
        at->second.first = std::min(at->second.first, record.loss);
        at->second.second = std::max(at->second.second, record.loss);
      }
      ++seen[record.step];
    }
  }
  Band band{label, {}, {}, {}};
  for (const auto& [step, low_high] : spread) {
    if (seen[step] < runs.size()) continue;
    band.steps.push_back(step);
    band.low.push_back(low_high.first);
    band.high.push_back(low_high.second);
  }
  return band;
}

const std::vector<Metric>& plotted_metrics() {
  static const std::vector<Metric> metrics = {loss_of,    grad_norm_of,  loss_scale_of,
                                              lr_of,      compute_ms_of, data_ms_of,
                                              comm_ms_of, memory_mib_of};
  return metrics;
}

std::vector<Plot> metric_plots(const Curves& subject, const std::vector<Curves>& others,
                               const std::optional<Band>& band) {
  std::vector<Plot> plots;
  Plot loss = per_rank_plot("loss", "Loss", "", subject, others, loss_of);
  if (band && !band->steps.empty()) {
    loss.series.push_back({band->label + " · high", SeriesRole::BandHigh, band->steps, band->high});
    loss.series.push_back({band->label + " · low", SeriesRole::BandLow, band->steps, band->low});
  }
  plots.push_back(std::move(loss));
  plots.push_back(per_rank_plot("grad_norm", "Gradient norm", "", subject, others, grad_norm_of));
  // fp16's dynamic loss scale: halved at each skipped (overflowing) step, so a collapse shows as
  // a staircase down. Only for trainers that report it (dropped below when none does).
  plots.push_back(per_rank_plot("loss_scale", "Loss scale", "", subject, others, loss_scale_of));
  plots.push_back(per_rank_plot("lr", "Learning rate", "", subject, others, lr_of));
  // Step time split into its parts, per rank: a straggler's compute, a starved rank's data wait
  // and the peers' comm wait are told apart at a glance.
  Plot time{"step_time", "Step time: compute / data / comm", "ms", {}};
  const auto ranks = ranks_of(subject.steps);
  const std::vector<std::pair<std::string, Metric>> parts = {
      {"compute", compute_ms_of}, {"data", data_ms_of}, {"comm", comm_ms_of}};
  for (const auto& [part, metric] : parts)
    for (int rank : ranks)
      time.series.push_back(series_of(subject.steps, rank, metric,
                                      "rank " + std::to_string(rank) + " " + part,
                                      SeriesRole::Subject));
  plots.push_back(std::move(time));
  Plot memory{"memory", "Memory per rank", "MiB", {}};
  for (int rank : ranks)
    memory.series.push_back(series_of(subject.steps, rank, memory_mib_of,
                                      "rank " + std::to_string(rank), SeriesRole::Subject));
  plots.push_back(std::move(memory));
  // A line for what a trainer never reported (a data time it does not measure) is only a legend
  // entry; a plot with no line left is dropped.
  for (auto& plot : plots)
    plot.series.erase(std::remove_if(plot.series.begin(), plot.series.end(),
                                     [](const Series& s) { return s.values.empty(); }),
                      plot.series.end());
  plots.erase(
      std::remove_if(plots.begin(), plots.end(), [](const Plot& p) { return !has_values(p); }),
      plots.end());
  return plots;
}

json plots_json(const std::vector<Plot>& plots, std::optional<int64_t> bad_step) {
  json out = {{"bad_step", bad_step ? json(*bad_step) : json()}, {"plots", json::array()}};
  for (const auto& plot : plots) {
    std::set<int64_t> steps;
    for (const auto& series : plot.series) steps.insert(series.steps.begin(), series.steps.end());
    const std::vector<int64_t> axis(steps.begin(), steps.end());
    std::optional<std::pair<int64_t, int64_t>> focus;
    if (bad_step) focus = std::make_pair(*bad_step - kFocusSteps, *bad_step + kFocusSteps);
    const StepBuckets buckets(axis, kMaxPlotBuckets, focus);
    json lines = json::array();
    for (const auto& series : plot.series) {
      const auto [values, nonfinite] = buckets.line(series);
      lines.push_back({{"label", series.label},
                       {"role", to_string(series.role)},
                       {"values", values},
                       {"nonfinite", nonfinite}});
    }
    out["plots"].push_back({{"id", plot.id},
                            {"title", plot.title},
                            {"unit", plot.unit},
                            {"x", buckets.x()},
                            {"series", lines}});
  }
  return out;
}

}  // namespace faultline::report
