// Store → Report for a single run: its verdict, failures and first anomaly, what it was, and
// its curves against a reference.
#include "report/report_gather.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/text.hpp"
#include "probes/detectors/failure_kind.hpp"
#include "report/gather_parts.hpp"
#include "report/gpu_figures.hpp"
#include "report/headline.hpp"
#include "report/plot_data.hpp"

namespace faultline::report {

using nlohmann::json;
using namespace gather;

namespace {

// Whether a stored failure fails its run: a warning (bad_init, teardown_crash) does not.
bool fails_run(const store::RunFailure& failure) {
  const auto kind = detectors::parse_failure_kind(failure.kind);
  return !kind || detectors::severity(*kind) == detectors::Severity::Failure;
}

}  // namespace

Report gather_run(const store::Store& store, int64_t run_id, const GatherOptions& options) {
  const auto run = load_run(store, run_id);
  const auto summary = store.summarize(run_id);
  const int64_t steps_done = std::max<int64_t>(0, summary.last_step);  // -1: no step record
  Report report;
  report.subject = Subject::Run;
  report.title = fmt::format("Run {}", run_id);
  const auto failing = std::find_if(run.failures.begin(), run.failures.end(), fails_run);
  report.failed = failing != run.failures.end();
  if (report.failed) {
    const auto& first = *failing;
    const auto subject = first.rank >= 0 ? rank_as_subject(first.kind, first.rank) : std::nullopt;
    report.verdict = fmt::format("Run {} failed: {}", run_id,
                                 subject ? *subject : what_happened(first.kind, span_of(first)));
    if (first.step >= 0) report.verdict += fmt::format(" at step {}", first.step);
    if (first.rank >= 0 && !subject) report.verdict += fmt::format(" on rank {}", first.rank);
    report.verdict += ".";
    for (const auto& failure : run.failures)
      if (failure.step >= 0 && (!report.bad_step || failure.step < *report.bad_step))
        report.bad_step = failure.step;
  } else {
    report.verdict =
        fmt::format("Run {} {} after {} step{} on {} rank{}", run_id,
                    run.verdict.empty() ? store::to_string(run.status) : run.verdict, steps_done,
                    steps_done == 1 ? "" : "s", run.ranks, run.ranks == 1 ? "" : "s");
    if (summary.first_loss && summary.last_loss)
      report.verdict +=
          fmt::format("; loss {:.4g} → {:.4g}", *summary.first_loss, *summary.last_loss);
    for (const auto& warning : run.failures) {
      report.verdict += "; warning: " + what_happened(warning.kind, span_of(warning));
      if (warning.rank >= 0) report.verdict += fmt::format(" (rank {})", warning.rank);
    }
    report.verdict += ".";
  }
  report.failures.columns = {"kind", "step", "rank", "detail"};
  // What failed the run first, then the warnings beside it (a rank that died as it exited).
  auto listed = run.failures;
  std::stable_partition(listed.begin(), listed.end(), fails_run);
  for (const auto& failure : listed)
    report.failures.rows.push_back(
        {failure.kind, failure.step >= 0 ? std::to_string(failure.step) : "",
         failure.rank >= 0 ? std::to_string(failure.rank) : "", failure.detail});
  // Why it could not run (the trainer's own words, from its log) is the table's first row.
  if (!run.infra_detail.empty())
    report.failures.rows.insert(report.failures.rows.begin(),
                                {run.verdict, "", "", run.infra_detail});
  const auto anomalies = store.anomalies(run_id);
  if (!anomalies.empty()) {
    const auto& first = anomalies.front();
    add_fact(report.location, "first anomaly", json(first.kind));
    add_fact(report.location, "step", json(first.step));
    add_fact(report.location, "phase", first.phase.empty() ? json() : json(first.phase));
    add_fact(report.location, "module / parameter",
             first.where.empty() ? json() : json(first.where));
    add_fact(report.location, "rank", json(first.rank));
    add_detail(report, first.detail);
  }
  report.summary = {{"recipe", run.config_path},
                    {"ranks", std::to_string(run.ranks)},
                    {"steps", fmt::format("{} of {} asked", steps_done, run.steps)},
                    {"status", store::to_string(run.status)},
                    {"started", run.started_at},
                    {"ended", run.ended_at},
                    {"started by", run.parent}};
  // A rank a signal killed has no exit code of its own (stored as 0): the signal says it.
  if (run.signal)
    report.summary.push_back({"signal", *run.signal});
  else if (run.exit_code)
    report.summary.push_back({"exit code", std::to_string(*run.exit_code)});
  if (report.failed) report.repro_command = fmt::format("faultline isolate --run {}", run_id);
  report.trainer_command =
      shell_command(json::parse(run.argv_json).get<std::vector<std::string>>());
  auto records = plotted_records(store, run_id, report.bad_step);
  Curves curves{fmt::format("run {}", run_id), SeriesRole::Subject, records.take()};
  const auto band = reference_band(store, run, options, report.notes);
  report.loss = records.rank_loss(report.failed ? failing->rank : -1);
  report.plots = metric_plots(curves, {}, band);
  add_gpu_time(report, store, run_id);
  return report;
}

}  // namespace faultline::report
