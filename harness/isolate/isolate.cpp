// The isolate pipeline as a list of phases, and the finding it stores. Progress of the search
// is written to the store after every phase; the trials themselves are cached (trial_cache.hpp).
#include "harness/isolate/isolate.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "common/text.hpp"
#include "harness/isolate/isolate_phases.hpp"
#include "harness/isolate/repro.hpp"
#include "harness/trial/run_facts.hpp"
#include "store/store.hpp"

namespace faultline::harness {

namespace {

using nlohmann::json;

json number_or_null(double value) {
  return std::isfinite(value) ? json(value) : json(std::isnan(value) ? "nan" : "inf");
}

json steps_around(store::Store& store, int64_t run_id, int64_t step) {
  json rows = json::array();
  for (const auto& record :
       step > 0 ? store.steps_between(run_id, step - 4, step, 0) : store.steps(run_id, 0)) {
    rows.push_back({{"step", record.step},
                    {"loss", number_or_null(record.loss)},
                    {"grad_norm", number_or_null(record.grad_norm)},
                    {"lr", number_or_null(record.lr)}});
  }
  if (step <= 0 && rows.size() > 5) rows.erase(rows.begin(), rows.end() - 5);
  return rows;
}

}  // namespace

json spec_to_json(const TrialSpec& spec) {
  json out = {{"config_path", spec.config_path},
              {"overrides", spec.overrides},
              {"ranks", spec.ranks},
              {"stop_after", spec.stop_after},
              {"data_fraction", spec.data_fraction},
              {"resume", spec.resume},
              {"parent", spec.parent},
              {"hosts", spec.hosts},
              {"repeat", spec.repeat}};
  // Only where known: a search's stored request (and its identity) stays as it was without it.
  if (spec.resume_step > 0) out["resume_step"] = spec.resume_step;
  return out;
}

TrialSpec spec_from_json(const json& in) {
  TrialSpec spec;
  spec.config_path = in.at("config_path").get<std::string>();
  spec.overrides = in.at("overrides").get<std::vector<std::string>>();
  spec.ranks = in.at("ranks").get<int>();
  spec.stop_after = in.at("stop_after").get<int64_t>();
  spec.data_fraction = in.at("data_fraction").get<double>();
  spec.resume = in.value("resume", "");
  spec.resume_step = in.value("resume_step", int64_t{0});  // absent from specs stored before it
  spec.parent = in.value("parent", "");
  spec.hosts = in.value("hosts", std::vector<std::string>{});
  spec.repeat = in.value("repeat", 0);
  return spec;
}

json stored_timeline(const store::SearchInfo& search) {
  return json::parse(search.state_json).value("timeline", json::array());
}

std::string pasted_repro_command(const json& repro) {
  if (repro.contains("command") && repro["command"].is_string())
    return repro["command"].get<std::string>();
  return shell_command(repro.value("argv", std::vector<std::string>{}));
}

json to_json(const Finding& finding) {
  auto or_null = [](const std::string& text) { return text.empty() ? json() : json(text); };
  json culprit;
  if (finding.config_culprit) {
    culprit = json::array();
    for (const auto& change : *finding.config_culprit)
      culprit.push_back(
          {{"key", change.key}, {"baseline", change.baseline}, {"failing", change.failing}});
  }
  json scale;
  if (finding.min_scale)
    scale = {{"ranks", finding.min_scale->ranks},
             {"from_step", finding.min_scale->from_step},
             {"to_step", finding.min_scale->steps},
             {"steps", finding.min_scale->steps},
             {"data_fraction", finding.min_scale->data_fraction}};
  return {{"kind", to_string(finding.kind)},
          {"step", finding.step > 0 ? json(finding.step) : json()},
          {"rank", finding.rank >= 0 ? json(finding.rank) : json()},
          {"ranks", finding.ranks},
          {"host", or_null(finding.host)},
          {"phase", or_null(finding.phase)},
          {"where", or_null(finding.where)},
          {"detail", finding.detail},
          {"samples", finding.samples ? json(*finding.samples) : json()},
          {"shards", finding.samples ? json(finding.shards) : json()},
          {"config_culprit", culprit},
          {"min_scale", scale},
          {"trials", finding.trials},
          {"trials_reused", finding.trials_reused},
          {"steps_executed", finding.steps_executed},
          {"rank_steps_executed", finding.rank_steps_executed},
          {"skipped", finding.skipped},
          {"evidence_run", finding.evidence_run},
          {"tolerance", kReproTolerance},
          {"evidence", finding.evidence}};
}

Isolator::Isolator(store::Store& store, TrialCache& cache, IsolateOptions options,
                   ProgressSink progress)
    : store_(store), cache_(cache), options_(std::move(options)), progress_(std::move(progress)) {}

IsolateResult Isolator::run(const IsolateRequest& request) {
  isolate::Context context(store_, cache_, options_, progress_, request.jobs);
  IsolateResult result;
  TrialSpec failing = request.failing;
  std::optional<detectors::FailureKind> expected_kind;
  std::optional<isolate::Evidence> evidence;
  std::optional<TrialSpec> baseline = request.baseline;
  bool worse_than_reference = false;  // the stored run's failure: judged against a reference
  if (request.from_run > 0) {
    auto start = isolate::start_from_run(context, request.from_run, baseline);
    evidence = std::move(start.evidence);
    expected_kind = start.expected_kind;
    worse_than_reference = start.worse_than_reference;
    failing = evidence->spec;
  }
  context.trainer = contract::TrainerContract::of(failing.config_path);
  if (evidence && !evidence->recipe.empty())
    context.trainer = context.trainer.declared_in(evidence->recipe);
  // A baseline that computes the same thing can neither be a loss reference nor differ in a
  // key: said now, not after the trials that would show it.
  if (baseline) isolate::config_differences(context, failing, *baseline);
  json state = {{"request", {{"failing", spec_to_json(failing)}, {"from_run", request.from_run}}},
                {"phase", "reproduce"}};
  result.search_id = store_.create_search("isolate", state.dump());
  SearchCheckpoint checkpoint = [&](const std::string& phase, store::SearchStatus status) {
    state["phase"] = phase;
    state["trials"] = context.trials;
    state["steps_executed"] = context.steps_executed;
    state["rank_steps_executed"] = context.rank_steps_executed;
    state["timeline"] = context.timeline;
    store_.update_search(result.search_id, state.dump(), status);
  };

  // 0. a stored multi-rank run that passed: its own records are the run the ranks are checked on
  if (evidence && !evidence->failure) {
    checkpoint("ranks", store::SearchStatus::Running);
    const Outcome stored = isolate::stored_outcome(context, *evidence);
    if (auto diverging = isolate::locate_diverging_ranks(context, failing, stored))
      return store_rank_finding(context, result, state, checkpoint, *diverging, stored);
    result.message = "run " + std::to_string(evidence->run_id) + " passed every detector and its " +
                     std::to_string(failing.ranks) +
                     " ranks agree with a 1-rank replay of the same batches";
    checkpoint("not reproduced", store::SearchStatus::Done);
    return result;
  }

  // 1. reproduce: from the stored run's last checkpoint before the failure, else from step 0
  std::string why_not;
  Outcome ran;
  std::optional<isolate::Reproduction> reproduction;
  if (evidence) reproduction = isolate::replay_evidence(context, *evidence, why_not);
  if (evidence && !reproduction) context.skip("replayed from step 0: " + why_not);
  // From step 0, a stored failure tied to a step needs no step after it.
  const TrialSpec from_start = evidence ? isolate::up_to_its_failure(context, *evidence) : failing;
  if (reproduction)
    ran = reproduction->outcome;
  else if (!worse_than_reference)  // alone it would pass: straight to the baseline below
    reproduction = isolate::reproduce(context, from_start, expected_kind, why_not, ran);
  // A run whose only failures were timing noise (not confirmed by identical runs) passed on its
  // numbers: the silent corruption check below still applies to it.
  bool numbers_passed = ran.verdict == Verdict::Pass;
  if (reproduction) {
    if (auto noisy = isolate::confirm_timing(context, *reproduction)) {
      why_not = *noisy;
      reproduction.reset();
      numbers_passed = std::all_of(ran.failures.begin(), ran.failures.end(),
                                   [](const auto& f) { return detectors::is_timing(f.kind); });
    }
  }
  if (!reproduction && !expected_kind && (worse_than_reference || numbers_passed) && baseline &&
      (request.scope == IsolateScope::All || request.scope == IsolateScope::Config)) {
    // Nothing failed alone: does it train worse than the baseline?
    checkpoint("reproduce against the baseline", store::SearchStatus::Running);
    reproduction = isolate::reproduce_against_baseline(context, failing, *baseline, why_not, ran);
  }
  if (!reproduction && !expected_kind && !worse_than_reference && failing.ranks > 1 &&
      numbers_passed && request.scope == IsolateScope::All) {
    // Nothing failed, but silent corruption fails no detector: do the ranks agree?
    checkpoint("ranks", store::SearchStatus::Running);
    if (auto diverging = isolate::locate_diverging_ranks(context, failing, ran))
      return store_rank_finding(context, result, state, checkpoint, *diverging, ran);
    why_not += "; its " + std::to_string(failing.ranks) +
               " ranks agree with a 1-rank replay of the same batches";
  }
  if (!reproduction && expected_kind && !detectors::is_timing(*expected_kind)) {
    // The stored run failed; this one did not: identical runs vote on whether it is flaky.
    if (auto flaky = isolate::vote_on_reproduction(context, from_start, *expected_kind)) {
      result.finding.kind = flaky->kind;
      result.finding.detail = flaky->detail;
      result.finding.repro = from_start;
      return store_finding(context, result, state, checkpoint, {});
    }
  }
  if (!reproduction) {
    result.message = why_not;
    checkpoint("not reproduced", store::SearchStatus::Done);
    return result;
  }
  // 2. scale down
  checkpoint("scale", store::SearchStatus::Running);
  auto scaled = isolate::scale_down(context, *reproduction);
  Finding& finding = result.finding;
  finding.kind = reproduction->failure.kind;
  finding.rank = reproduction->failure.rank;
  if (finding.rank >= 0) {
    finding.ranks = {finding.rank};
    // Where the rank failed in the run searched: its replays may have been placed elsewhere (a
    // Slurm job's on whichever nodes were free), and naming their node sent a bad-node hunt to
    // a machine the rank never ran on.
    auto hosts = evidence ? rank_hosts(store_, evidence->run_id) : std::vector<std::string>{};
    if (static_cast<size_t>(finding.rank) >= hosts.size() || hosts[finding.rank].empty())
      hosts = rank_hosts(store_, reproduction->outcome.run_id);
    if (static_cast<size_t>(finding.rank) < hosts.size()) finding.host = hosts[finding.rank];
  }
  finding.detail = reproduction->failure.detail;
  finding.min_scale = scaled.scale;
  finding.step = scaled.local_failure.step;
  // 2b. replays are only worth something if identical trials agree
  checkpoint("determinism", store::SearchStatus::Running);
  if (auto differs = isolate::check_determinism(
          context, scaled, reproduction->from && evidence ? evidence->run_id : 0)) {
    finding.kind = differs->kind;
    finding.step = differs->step;
    finding.rank = differs->rank;
    finding.detail = differs->detail + "; the run failed with " +
                     to_string(reproduction->failure.kind) + " at step " +
                     std::to_string(reproduction->failure.step) +
                     ", but a search over replays cannot be trusted";
  }
  // 3-4. steps, then inside the step
  if (request.scope != IsolateScope::Config && detectors::is_curve(finding.kind)) {
    context.skip(
        "skipped steps and samples: a loss regression is the whole curve's, first shown "
        "at step " +
        std::to_string(finding.step) + ", not one step's");
  } else if (request.scope != IsolateScope::Config &&
             finding.kind != detectors::FailureKind::Nondeterministic) {
    checkpoint("steps", store::SearchStatus::Running);
    auto location = isolate::locate_step(context, scaled.local_spec, scaled.local_outcome,
                                         scaled.local_failure);
    finding.step = location.step;
    finding.phase = location.phase;
    finding.where = location.where;
    if (!location.detail.empty()) finding.detail = location.detail;
    if (request.scope != IsolateScope::Steps && !detectors::spans_steps(scaled.local_failure)) {
      checkpoint("samples", store::SearchStatus::Running);
      auto samples = isolate::locate_samples(context, scaled.local_spec, scaled.local_outcome,
                                             location, finding.kind);
      finding.samples = samples.samples;
      finding.shards = samples.shards;
    }
  }
  // 5. config
  if (baseline && (request.scope == IsolateScope::All || request.scope == IsolateScope::Config)) {
    checkpoint("config", store::SearchStatus::Running);
    finding.config_culprit =
        isolate::config_culprit(context, failing, *baseline, scaled.scale, scaled.local_failure);
  }
  // 6. the finding
  finding.repro = scaled.repro_spec;
  finding.evidence_run = scaled.repro_outcome.run_id;
  auto repro_failure = isolate::failure_of(scaled.repro_outcome, finding.kind);
  finding.evidence = {{"run", scaled.repro_outcome.run_id},
                      {"failure_step", repro_failure ? json(repro_failure->step) : json()},
                      {"host", host_facts(start_event(store_, scaled.repro_outcome.run_id))},
                      {"steps", steps_around(store_, scaled.local_outcome.run_id, finding.step)},
                      {"failing_run", evidence ? evidence->run_id : reproduction->outcome.run_id}};
  if (context.loss_reference_run)
    finding.evidence["loss_reference_run"] = context.loss_reference_run;
  return store_finding(context, result, state, checkpoint, {});
}

IsolateResult Isolator::store_rank_finding(isolate::Context& context, IsolateResult& result,
                                           json& state, const SearchCheckpoint& checkpoint,
                                           const isolate::RankLocation& location,
                                           const Outcome& failing_run) {
  Finding& finding = result.finding;
  finding.kind = detectors::FailureKind::RankDivergence;
  finding.step = location.step;
  finding.ranks = location.ranks;
  finding.rank = location.ranks.size() == 1 ? location.ranks[0] : -1;
  finding.host = location.host;
  finding.phase = location.phase;
  finding.detail = location.detail;
  finding.min_scale = Scale{};
  finding.min_scale->ranks = location.replica_spec.ranks;
  finding.min_scale->from_step = location.replica_from;
  finding.min_scale->steps = location.step;
  finding.min_scale->data_fraction = context.trainer.data_fraction(location.replica_spec);
  finding.repro = location.replica_spec;
  finding.evidence_run = location.replica_outcome.run_id;
  finding.evidence = location.evidence;
  finding.evidence["run"] = location.replica_outcome.run_id;
  finding.evidence["failure_step"] = location.step;
  finding.evidence["host"] = host_facts(start_event(store_, location.replica_outcome.run_id));
  finding.evidence["steps"] = steps_around(store_, failing_run.run_id, location.step);
  finding.evidence["failing_run"] = failing_run.run_id;
  return store_finding(context, result, state, checkpoint, {});
}

namespace {

// A stored finding of the same kind, reproduced by the same trial spec, at the same place, by a
// search of the same reach (its trials, counting those reused from the cache, and what it could
// not search): `bisect steps` stops before the samples an `isolate` goes on to, and its null
// samples mean "not searched". The newest such.
std::optional<int64_t> same_finding_stored(const store::Store& store,
                                           const store::FindingInfo& found) {
  const json fields = json::parse(found.fields_json);
  auto place = [](const json& f) {
    json kept = json::object();
    for (const char* key : {"step", "rank", "ranks", "where", "phase", "samples", "shards",
                            "config_culprit", "host", "trials", "skipped"})
      if (f.contains(key)) kept[key] = f[key];
    return kept;
  };
  for (const auto& stored : store.list_findings(-1))
    if (stored.kind == found.kind && stored.repro_json == found.repro_json &&
        place(json::parse(stored.fields_json, nullptr, false)) == place(fields))
      return stored.id;
  return std::nullopt;
}

}  // namespace

IsolateResult Isolator::store_finding(isolate::Context& context, IsolateResult& result, json& state,
                                      const SearchCheckpoint& checkpoint, const std::string& note) {
  Finding& finding = result.finding;
  if (!note.empty()) finding.detail += note;
  finding.trials = context.trials;
  finding.trials_reused = context.trials_reused;
  finding.steps_executed = context.steps_executed;
  finding.rank_steps_executed = context.rank_steps_executed;
  finding.skipped = context.skipped;
  store::FindingInfo info;
  info.kind = to_string(finding.kind);
  info.fields_json = to_json(finding).dump();
  info.repro_json = json{{"spec", spec_to_json(finding.repro)},
                         {"argv", trainer_argv(finding.repro, options_.trainer)},
                         {"command", contract::TrainerContract::of(finding.repro.config_path)
                                         .pasted_command(finding.repro, options_.trainer)}}
                        .dump();
  info.search_id = result.search_id;
  // The same search again (its trials reused from the cache) finds the same thing: it is the
  // finding stored before, not a second one.
  if (const auto same = same_finding_stored(store_, info)) {
    result.finding_id = *same;
    result.already_stored = true;
  } else {
    result.finding_id = store_.add_finding(info);
  }
  state["finding_id"] = result.finding_id;
  checkpoint("done", store::SearchStatus::Done);
  result.status = IsolateStatus::Localized;
  return result;
}

}  // namespace faultline::harness
