// Store → Report for a finding: its fields and repro, its search's timeline, and the runs they
// name (the failing run, the replay it stands on, a baseline and a reference).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/event_names.hpp"
#include "common/text.hpp"
#include "harness/contract/trainer_contract.hpp"
#include "harness/isolate/isolate.hpp"
#include "harness/trial/trial.hpp"
#include "probes/detectors/failure_kind.hpp"
#include "report/gather_parts.hpp"
#include "report/gpu_figures.hpp"
#include "report/headline.hpp"
#include "report/plot_data.hpp"
#include "report/rank_plot.hpp"
#include "report/report_gather.hpp"

namespace faultline::report {

using nlohmann::json;
using namespace gather;

namespace {

std::string first_failure(const store::RunInfo& run) {
  if (run.failures.empty()) return "";
  const auto& failure = run.failures.front();
  std::string text = failure.kind;
  if (failure.step >= 0) text += fmt::format(" at step {}", failure.step);
  if (failure.rank >= 0) text += fmt::format(" (rank {})", failure.rank);
  return text;
}

// The step each checkpoint file of these runs was saved at (a file saved over: its last save).
std::map<std::string, int64_t> saved_steps(const store::Store& store,
                                           const std::vector<int64_t>& runs) {
  std::map<std::string, int64_t> steps;
  for (int64_t run : runs)
    for (const auto& checkpoint : harness::contract::named_checkpoints(store, run))
      steps[checkpoint.path] = checkpoint.step;
  return steps;
}

// The step a run started after: its resume event's, or, for a log-only trainer (which writes
// none), the step that saved the checkpoint its trial was given.
int64_t resumed_from(const store::Store& store, const store::RunInfo& run,
                     const std::map<std::string, int64_t>& saved) {
  for (const auto& event : store.events(run.id, {kResumeEvent}))
    if (event.step) return *event.step;
  if (const auto trial = store.trial_of_run(run.id)) {
    const auto spec = json::parse(trial->spec_json, nullptr, false);
    if (spec.is_object())
      if (const auto it = saved.find(spec.value("resume", "")); it != saved.end())
        return it->second;
  }
  return 0;
}

// "2 ranks · steps 9..12 · 50% of the data": the shape of the trial a run was.
std::string trial_shape(const store::RunInfo& run, int64_t from) {
  std::string text = fmt::format("{} rank{} · steps {}..{}", run.ranks, run.ranks == 1 ? "" : "s",
                                 from + 1, run.steps);
  if (run.data_fraction < 1) text += fmt::format(" · {:g}% of the data", 100 * run.data_fraction);
  return text;
}

std::vector<TrialRow> timeline_of(const store::Store& store, const json& entries,
                                  int64_t failing_run) {
  std::vector<int64_t> runs = {failing_run};
  for (const auto& entry : entries) runs.push_back(entry.value("run", int64_t{0}));
  const auto saved = saved_steps(store, runs);
  std::vector<TrialRow> rows;
  for (const auto& entry : entries) {
    TrialRow row;
    row.phase = entry.value("phase", "");
    row.run_id = entry.value("run", int64_t{0});
    row.verdict = entry.value("verdict", "");
    row.reused = entry.value("reused", false);
    row.steps_run = entry.value("steps_run", int64_t{0});
    row.wall_s = entry.value("wall_s", 0.0);
    if (auto run = store.get_run(row.run_id)) {
      row.tested = trial_shape(*run, resumed_from(store, *run, saved));
      row.failure = first_failure(*run);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

Table rank_table(const json& rows) {
  Table table;
  if (!rows.is_array() || rows.empty()) return table;
  // The usual columns first, then whatever else the rows hold.
  std::vector<std::string> preferred = {
      "rank", "host", "verdict", "distance", "median_step_ms", "median_data_ms", "median_comm_ms"};
  for (const auto& key : preferred)
    if (rows.front().contains(key)) table.columns.push_back(key);
  for (const auto& item : rows.front().items())
    if (std::find(table.columns.begin(), table.columns.end(), item.key()) == table.columns.end())
      table.columns.push_back(item.key());
  for (const auto& row : rows) {
    std::vector<std::string> cells;
    for (const auto& column : table.columns) cells.push_back(text_of(row.value(column, json())));
    table.rows.push_back(std::move(cells));
  }
  return table;
}

// The span of the failure a finding is about, as its failing run stored it.
FailureSpan finding_span(const store::RunInfo& failing_run, const json& fields) {
  const std::string kind = fields.value("kind", "");
  const auto step = fields.value("step", json());
  for (const auto& failure : failing_run.failures)
    if (failure.kind == kind && step.is_number() && failure.step == step.get<int64_t>())
      return span_of(failure);
  return FailureSpan::OneStep;
}

std::string finding_verdict(const json& fields, FailureSpan span) {
  const json rank = fields.value("rank", json());
  const auto subject = rank.is_number_integer()
                           ? rank_as_subject(fields.value("kind", ""), rank.get<int64_t>())
                           : std::nullopt;
  std::string text = subject ? *subject : what_happened(fields.value("kind", ""), span);
  if (!fields.value("step", json()).is_null()) text += " at step " + text_of(fields["step"]);
  // An LR anomaly's place is the optimizer's lr, which "the learning rate" already says.
  const bool where_said =
      detectors::parse_failure_kind(fields.value("kind", "")) == detectors::FailureKind::LrAnomaly;
  if (!fields.value("where", json()).is_null() && !where_said) {
    text += " in " + text_of(fields["where"]);
    if (!fields.value("phase", json()).is_null() && fields["phase"] != fields["where"])
      text += " (" + text_of(fields["phase"]) + ")";
  }
  if (!rank.is_null() && !subject) text += " on rank " + text_of(rank);
  if (!fields.value("host", json()).is_null()) text += " of host " + text_of(fields["host"]);
  if (fields.value("samples", json()).is_array() && !fields["samples"].empty())
    text += ", caused by sample " + text_of(fields["samples"]);
  const json culprit = fields.value("config_culprit", json());
  if (culprit.is_array() && !culprit.empty()) {
    std::vector<std::string> changes;
    for (const auto& change : culprit)
      changes.push_back(fmt::format("{} {} → {}", text_of(change["key"]),
                                    text_of(change["baseline"]), text_of(change["failing"])));
    text += fmt::format("; the config change to blame: {}", fmt::join(changes, ", "));
  }
  const json scale = fields.value("min_scale", json());
  if (scale.is_object()) {
    // A replay from a checkpoint runs only the steps after it.
    const int64_t from = scale.value("from_step", int64_t{0});
    const int64_t to = scale.value("steps", int64_t{0});
    text +=
        fmt::format("; it reproduces on {} rank{} in {} step{}", text_of(scale["ranks"]),
                    scale.value("ranks", 1) == 1 ? "" : "s", to - from, to - from == 1 ? "" : "s");
    if (from > 0) text += fmt::format(" from the checkpoint of step {}", from);
  }
  return text + ".";
}

// The parameters' distance between the failing run's ranks, beside the 1-rank replay's, one run
// per checkpoint interval (a finding stored before one_rank_runs existed names the first
// interval's only).
std::optional<Plot> rank_fingerprint_plot(const store::Store& store, int64_t failing_run,
                                          const json& evidence) {
  std::vector<int64_t> replays = evidence.value("one_rank_runs", std::vector<int64_t>{});
  if (replays.empty() && evidence.value("one_rank_run", int64_t{0}) > 0)
    replays.push_back(evidence["one_rank_run"].get<int64_t>());
  std::vector<FingerprintRecord> replayed;
  for (int64_t run : replays) {
    const auto prints = store.fingerprints(run);
    replayed.insert(replayed.end(), prints.begin(), prints.end());
  }
  const std::string label =
      replays.empty() ? ""
      : replays.size() > 3
          ? fmt::format("1-rank replay ({} runs, one per checkpoint interval)", replays.size())
          : fmt::format("1-rank replay (run{} {})", replays.size() > 1 ? "s" : "",
                        fmt::join(replays, ","));
  return rank_params_plot(store.fingerprints(failing_run), replayed, label);
}

}  // namespace

Report gather_finding(const store::Store& store, int64_t finding_id, const GatherOptions& options) {
  const auto info = store.get_finding(finding_id);
  if (!info)
    throw UserError("no finding F" + std::to_string(finding_id), store.path(),
                    "see `faultline findings`");
  const json fields = json::parse(info->fields_json);
  const json repro = json::parse(info->repro_json);
  const json evidence = fields.value("evidence", json::object());
  Report report;
  report.subject = Subject::Finding;
  report.title = fmt::format("Finding F{}", finding_id);
  const int64_t evidence_run = fields.value("evidence_run", int64_t{0});
  const int64_t failing_run = evidence.value("failing_run", json(evidence_run)).is_number()
                                  ? evidence.value("failing_run", evidence_run)
                                  : evidence_run;
  const auto subject = load_run(store, failing_run);
  report.verdict = finding_verdict(fields, finding_span(subject, fields));
  if (fields.value("step", json()).is_number()) report.bad_step = fields["step"].get<int64_t>();

  add_fact(report.location, "step", fields.value("step", json()));
  add_fact(report.location, "phase", fields.value("phase", json()));
  add_fact(report.location, "module / parameter", fields.value("where", json()));
  add_fact(report.location, "samples", fields.value("samples", json()));
  add_fact(report.location, "shards", fields.value("shards", json()));
  add_fact(report.location, "rank", fields.value("rank", json()));
  if (fields.value("ranks", json::array()).size() > 1)
    add_fact(report.location, "ranks", fields["ranks"]);
  add_fact(report.location, "host", fields.value("host", json()));
  add_detail(report, fields.value("detail", std::string()));
  if (const char* hint = detectors::hint(info->kind); *hint)
    add_fact(report.location, "what to check", json(hint));
  report.rank_evidence = rank_table(evidence.value("ranks", json()));

  const json culprit = fields.value("config_culprit", json());
  report.has_baseline = culprit.is_array();
  for (const auto& change : culprit.is_array() ? culprit : json::array())
    report.config_culprit.push_back(
        {text_of(change["key"]), text_of(change["baseline"]), text_of(change["failing"])});

  const json host_facts = evidence.value("host", json::object());
  for (const auto& [key, value] : host_facts.items())
    report.deciding_facts.push_back({key, text_of(value)});
  add_fact(report.deciding_facts, "replay tolerance (relative loss)",
           fields.value("tolerance", json()));

  if (info->search_id)
    if (auto search = store.get_search(*info->search_id))
      report.timeline = timeline_of(store, harness::stored_timeline(*search), failing_run);
  double search_s = 0;
  for (const auto& trial : report.timeline) search_s += trial.wall_s;
  report.summary.push_back(
      {"search",
       fmt::format("{} ({} reused from the cache), {} trainer steps ({} rank-steps){}",
                   counted(fields.value("trials", 0), "trial"), fields.value("trials_reused", 0),
                   fields.value("steps_executed", 0), fields.value("rank_steps_executed", 0),
                   report.timeline.empty() ? "" : fmt::format(", {:.1f} s", search_s))});
  const json scale = fields.value("min_scale", json());
  if (scale.is_object())
    report.summary.push_back(
        {"smallest setup",
         fmt::format("{} rank(s), steps {}..{}, {:g}% of the data", text_of(scale["ranks"]),
                     scale.value("from_step", 0) + 1, text_of(scale["steps"]),
                     100 * scale.value("data_fraction", 1.0))});
  report.summary.push_back({"failing run", std::to_string(failing_run)});
  report.summary.push_back({"replay run", std::to_string(evidence_run)});
  report.summary.push_back({"found", info->created_at});
  for (const auto& why : fields.value("skipped", json::array()))
    report.notes.push_back(text_of(why));
  if (report.timeline.empty())
    report.notes.push_back("the search's trials were not recorded (found by an older faultline)");

  report.repro_command = fmt::format("faultline repro F{}", finding_id);
  report.trainer_command = harness::pasted_repro_command(repro);

  // The curves: the failing run, the replay the finding stands on, and a healthy reference.
  auto failing_records = plotted_records(store, failing_run, report.bad_step);
  Curves failing{fmt::format("failing run {}", failing_run), SeriesRole::Subject,
                 failing_records.take()};
  std::vector<Curves> others;
  if (evidence_run != failing_run && evidence_run > 0) {
    const auto replay = load_run(store, evidence_run);
    const bool healthy = replay.failures.empty();
    others.push_back({fmt::format("{}-rank replay (run {})", replay.ranks, evidence_run),
                      healthy ? SeriesRole::Reference : SeriesRole::Replay,
                      plotted_records(store, evidence_run, report.bad_step).take()});
  }
  for (const auto& trial : report.timeline)
    if (starts_with(trial.phase, harness::kBaselinePhase) &&
        harness::parse_verdict(trial.verdict) == harness::Verdict::Pass) {
      others.push_back({fmt::format("baseline (run {})", trial.run_id), SeriesRole::Reference,
                        plotted_records(store, trial.run_id, report.bad_step).take()});
      break;
    }
  const auto band = reference_band(store, subject, options, report.notes);
  if (std::none_of(others.begin(), others.end(),
                   [](const Curves& c) { return c.role == SeriesRole::Reference; }) &&
      !band)
    report.notes.push_back(
        "no healthy reference to compare with: give isolate a baseline (--baseline-set) or store "
        "one with `faultline reference add`");
  report.loss = failing_records.rank_loss(
      fields.value("rank", json()).is_number_integer() ? fields["rank"].get<int>() : -1);
  report.plots = metric_plots(failing, others, band);
  // A rank finding stands on fingerprints, not on the loss: their plot goes first.
  if (detectors::parse_failure_kind(fields.value("kind", "")) ==
      detectors::FailureKind::RankDivergence)
    if (auto plot = rank_fingerprint_plot(store, failing_run, evidence))
      report.plots.insert(report.plots.begin(), std::move(*plot));
  add_gpu_time(report, store, failing_run);
  return report;
}

}  // namespace faultline::report
