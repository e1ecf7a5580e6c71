// The report's plots as data: built from stored step records, and turned into the JSON the page's
// script hands to uPlot (one shared step axis per plot, null where a line has no value).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/metrics_record.hpp"
#include "report/report_model.hpp"

namespace faultline::report {

// One run's records and how its lines are labelled and drawn.
struct Curves {
  std::string label;  // "run 12", "baseline (run 15)"
  SeriesRole role = SeriesRole::Subject;
  std::vector<StepRecord> steps;  // every rank, ordered by rank then step
};

// The spread of a stored reference's runs: the lowest and highest loss at each step.
struct Band {
  std::string label;  // "reference 'tiny-seeds' (3 runs)"
  std::vector<int64_t> steps;
  std::vector<double> low, high;
};

// min/max loss per step over the runs' rank-0 records (steps every run has).
Band loss_band(const std::string& label, const std::vector<std::vector<StepRecord>>& runs);

// What a line draws from a record; nullopt: no point at its step.
using Metric = std::function<std::optional<double>(const StepRecord&)>;

// Every metric metric_plots draws, for thinning a long run's records (report/step_thinner.hpp).
const std::vector<Metric>& plotted_metrics();

// Loss, grad norm, the loss scale and LR (the subject per rank, the others' lowest rank), step time
// as compute / data / comm and memory per rank (the subject only). Plots without any value are left
// out.
std::vector<Plot> metric_plots(const Curves& subject, const std::vector<Curves>& others,
                               const std::optional<Band>& band);

// {"bad_step": n|null, "plots": [{"id", "title", "unit", "x": [steps],
//   "series": [{"label", "role", "values": [v|null], "nonfinite": [step...]}]}]}
// A plot of more than 2 × kMaxPlotBuckets steps is drawn from that many buckets of steps: each
// line's lowest and highest value in each, at the bucket's first and last step; but every step
// within kFocusSteps of the bad step, so zooming in on the failure shows each step.
constexpr size_t kMaxPlotBuckets = 1000;
constexpr int64_t kFocusSteps = 250;
nlohmann::json plots_json(const std::vector<Plot>& plots, std::optional<int64_t> bad_step);

}  // namespace faultline::report
