// Stored gpu records → the report's GPU plot and per-rank table.
#include "report/gpu_figures.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include "common/event_names.hpp"
#include "probes/detectors/stats.hpp"

namespace faultline::report {

using detectors::StepGpuTime;

GpuSteps stored_gpu_steps(const store::Store& store, int64_t run_id) {
  const auto ranks = store.gpu_ranks(run_id);
  if (ranks.empty()) return {};
  const auto starts = store.events(run_id, {kStartEvent});
  GpuSteps joined;
  // A rank at a time: a day's job has millions of intervals, one rank's are what a join holds.
  for (int rank : ranks) {
    detectors::GpuStepJoin join;
    for (const auto& start : starts)
      if (start.rank == rank) join.add(start);
    for (const auto& step : store.steps(run_id, rank)) join.add(step);
    int64_t dropped = 0;
    store.each_gpu_record(run_id, rank, [&](const GpuRecord& interval) {
      join.add(interval);
      dropped += interval.late;
    });
    if (dropped > 0) joined.dropped[rank] = dropped;
    const auto steps = join.steps();
    joined.steps.insert(joined.steps.end(), steps.begin(), steps.end());
  }
  return joined;
}

namespace {

using Part = std::function<double(const StepGpuTime&)>;
using NamedParts = std::vector<std::pair<const char*, Part>>;

double step_ms_of(const StepGpuTime& s) {
  return s.step_ms;
}
double compute_ms_of(const StepGpuTime& s) {
  return s.compute_ms;
}
double nccl_ms_of(const StepGpuTime& s) {
  return s.nccl_ms;
}
double idle_ms_of(const StepGpuTime& s) {
  return s.idle_ms;
}
double idle_in_data_ms_of(const StepGpuTime& s) {
  return s.idle_in_data_ms;
}

// The plot's lines of each rank.
const NamedParts& drawn_parts() {
  static const NamedParts drawn = {
      {"compute", compute_ms_of}, {"NCCL", nccl_ms_of}, {"idle", idle_ms_of}};
  return drawn;
}

// The table's columns between a rank's steps and its coverage: a median over its steps each.
const NamedParts& median_columns() {
  static const NamedParts columns = {{"step ms", step_ms_of},
                                     {"compute ms", compute_ms_of},
                                     {"NCCL ms", nccl_ms_of},
                                     {"idle ms", idle_ms_of},
                                     {"idle while data loads ms", idle_in_data_ms_of}};
  return columns;
}

std::map<int, std::vector<const StepGpuTime*>> by_rank(const std::vector<StepGpuTime>& steps) {
  std::map<int, std::vector<const StepGpuTime*>> ranks;
  for (const auto& step : steps) ranks[step.rank].push_back(&step);
  return ranks;
}

double median_of(const std::vector<const StepGpuTime*>& steps, const Part& part) {
  std::vector<double> values;
  values.reserve(steps.size());
  for (const auto* step : steps) values.push_back(part(*step));
  return detectors::median(std::move(values));
}

std::string ms(double value) {
  return fmt::format("{:.1f}", value);
}

}  // namespace

std::optional<Plot> gpu_time_plot(const std::vector<StepGpuTime>& steps) {
  if (steps.empty()) return std::nullopt;
  Plot plot{"gpu_time", "GPU per step: compute / NCCL / idle (CUPTI)", "ms", {}};
  const auto ranks = by_rank(steps);
  for (const auto& [name, part] : drawn_parts())
    for (const auto& [rank, own] : ranks) {
      Series series{fmt::format("rank {} {}", rank, name), SeriesRole::Subject, {}, {}};
      for (const auto* step : own) {
        series.steps.push_back(step->step);
        series.values.push_back(part(*step));
      }
      plot.series.push_back(std::move(series));
    }
  return plot;
}

Table gpu_time_table(const std::vector<StepGpuTime>& steps, const std::map<int, int64_t>& dropped) {
  Table table;
  if (steps.empty()) return table;
  table.columns = {"rank", "steps"};
  for (const auto& [name, part] : median_columns()) table.columns.push_back(name);
  table.columns.push_back("covered");
  if (!dropped.empty()) table.columns.push_back("dropped by the probe");
  for (const auto& [rank, own] : by_rank(steps)) {
    std::vector<std::string> row = {std::to_string(rank), std::to_string(own.size())};
    for (const auto& [name, part] : median_columns()) row.push_back(ms(median_of(own, part)));
    const double covered =
        median_of(own, [](const StepGpuTime& s) { return s.covered_ms / s.step_ms; });
    row.push_back(fmt::format("{:.0f}%", 100 * std::min(1.0, covered)));
    if (!dropped.empty()) {
      const auto it = dropped.find(rank);
      row.push_back(std::to_string(it == dropped.end() ? 0 : it->second));
    }
    table.rows.push_back(std::move(row));
  }
  return table;
}

std::optional<GpuShares> gpu_shares(const std::vector<StepGpuTime>& steps) {
  double covered = 0, compute = 0, nccl = 0, idle = 0;
  for (const auto& step : steps) {
    covered += step.covered_ms;
    compute += step.compute_ms;
    nccl += step.nccl_ms;
    idle += step.idle_ms;
  }
  if (covered <= 0) return std::nullopt;
  return GpuShares{static_cast<int64_t>(steps.size()), compute / covered, nccl / covered,
                   idle / covered};
}

void add_gpu_time(Report& report, const store::Store& store, int64_t run_id) {
  const auto joined = stored_gpu_steps(store, run_id);
  report.gpu_time = gpu_time_table(joined.steps, joined.dropped);
  int64_t dropped = 0;
  for (const auto& [rank, count] : joined.dropped) dropped += count;
  if (dropped > 0)
    report.notes.push_back(fmt::format(
        "the CUPTI probe dropped {} GPU activities that came after their interval was written "
        "(the table's last column, by rank): the figures of the steps there undercount; a larger "
        "FAULTLINE_CUPTI_FLUSH_MS gives them longer (intervals are written two flush periods "
        "after they end)",
        dropped));
  auto plot = gpu_time_plot(joined.steps);
  if (!plot) return;
  auto after = std::find_if(report.plots.begin(), report.plots.end(),
                            [](const Plot& p) { return p.id == "step_time"; });
  report.plots.insert(after == report.plots.end() ? after : after + 1, std::move(*plot));
}

}  // namespace faultline::report
