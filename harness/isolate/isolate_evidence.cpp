// Phase 0: start from a stored failing run's own evidence. Its failure and step come from the
// stored records, its checkpoints from its events; the failure is replayed from the last
// checkpoint before it, so confirming it costs one checkpoint interval, not the whole run.
#include <fmt/format.h>

#include "harness/contract/recipe.hpp"
#include "harness/isolate/isolate_phases.hpp"
#include "harness/trial/import_run.hpp"
#include "harness/trial/run_facts.hpp"
#include "harness/trial/trial.hpp"
#include "probes/detectors/run_judge.hpp"
#include "store/store.hpp"

namespace faultline::harness::isolate {

namespace {

// The fewest steps a replay of a rate over the whole run covers: the straggler's sign test
// needs at least 12 compared steps, data_stall 5, and a busy machine drops some.
constexpr int64_t kRateStretch = 50;

// Judged as a rate over steps, not at one: any long enough stretch of the run shows it again.
bool shows_in_any_stretch(detectors::FailureKind kind) {
  return kind == detectors::FailureKind::Straggler || kind == detectors::FailureKind::DataStall ||
         kind == detectors::FailureKind::SlowComm;
}

void check_launchable_config(const store::RunInfo& run) {
  if (is_launchable_config(run)) return;
  const std::string dir = run.parent.rfind("import:", 0) == 0 ? run.parent.substr(7) : "DIR";
  throw UserError("run " + std::to_string(run.id) +
                      " cannot be launched again: it was imported without a recipe, and its "
                      "trainer is not faultline-train (its stored config is the trainer's own)",
                  "--run",
                  "import it again with its recipe: `faultline import " + dir +
                      " -c RECIPE` (a recipe whose [trainer] section runs your script, "
                      "docs/external-trainers.md)");
}

}  // namespace

Evidence load_evidence(Context& context, int64_t run_id) {
  auto& store = context.store;
  auto run = store.get_run(run_id);
  if (!run)
    throw UserError("no run " + std::to_string(run_id) + " in the store", store.path(),
                    "`faultline runs` lists the stored runs");
  std::vector<detectors::Failure> failures;
  for (const auto& f : run->failures)
    if (auto kind = detectors::parse_failure_kind(f.kind))
      failures.push_back({*kind, f.step, f.rank, f.detail, f.shown_by});
  auto failure = primary_failure(failures);
  // A multi-rank run that passed may still hide ranks that disagree (silent corruption).
  const auto verdict = parse_verdict(run->verdict);
  const bool rank_check = verdict == Verdict::Pass && run->ranks > 1;
  if (!rank_check && (verdict != Verdict::Fail || !failure))
    throw UserError(
        "run " + std::to_string(run->id) + " did not fail (verdict '" + run->verdict + "')",
        "--run",
        "choose a failing run, or a passing multi-rank one to check its ranks: `faultline "
        "runs` shows verdicts");
  check_launchable_config(*run);
  Evidence evidence;
  evidence.run_id = run->id;
  evidence.spec.config_path =
      write_run_config(*run, context.options.work_dir, "run-" + std::to_string(run->id),
                       "the resolved config of stored run " + std::to_string(run->id));
  evidence.spec.ranks = run->ranks;
  evidence.recipe = run->config_path;
  if (!rank_check) evidence.failure = *failure;
  evidence.checkpoints = contract::checkpoints(store, run->id);
  evidence.steps = run->steps;
  evidence.stopped_writing = is_imported(*run) && evidence.failure &&
                             evidence.failure->kind == detectors::FailureKind::Crash;
  return evidence;
}

StoredStart start_from_run(Context& context, int64_t run_id, std::optional<TrialSpec>& baseline) {
  StoredStart start;
  start.evidence = load_evidence(context, run_id);
  const TrialSpec& stored = start.evidence.spec;
  if (baseline && baseline->config_path.empty()) {
    baseline->config_path = stored.config_path;
    baseline->ranks = stored.ranks;
    contract::load_recipe(baseline->config_path, baseline->overrides);  // bad keys: now
  }
  if (start.evidence.failure) start.expected_kind = start.evidence.failure->kind;
  if (start.expected_kind && detectors::is_curve(*start.expected_kind)) {
    if (!baseline)
      throw UserError("run " + std::to_string(run_id) + "'s " + to_string(*start.expected_kind) +
                          " was judged against a reference, and isolate has none",
                      "--run",
                      "give the known-good setup it is worse than: --baseline RECIPE or "
                      "--baseline-set key=value (the key values of the healthy run)");
    start.expected_kind.reset();
    start.worse_than_reference = true;
  }
  return start;
}

Outcome stored_outcome(Context& context, const Evidence& evidence) {
  Outcome outcome;
  outcome.verdict = Verdict::Pass;
  outcome.run_id = evidence.run_id;
  outcome.ranks = evidence.spec.ranks;
  for (const auto& record : context.store.steps(evidence.run_id))
    outcome.last_step = std::max(outcome.last_step, record.step);
  return outcome;
}

TrialSpec up_to_its_failure(const Context& context, const Evidence& evidence) {
  if (!evidence.failure) return evidence.spec;
  const auto& failure = *evidence.failure;
  const int64_t shown = detectors::evidence_step(failure);
  // The step that showed it is known: the failure's own step for a kind seen at one step, its
  // shown_by for one completed later (a run stored before shown_by was kept has none: whole).
  const bool known =
      detectors::is_seen_at_its_step(failure.kind) || failure.shown_by > failure.step;
  if (failure.step <= 0 || shown <= 0 || !known || shown >= context.trainer.steps(evidence.spec))
    return evidence.spec;
  return context.trainer.prefix(evidence.spec, shown);
}

std::optional<Reproduction> replay_evidence(Context& context, const Evidence& evidence,
                                            std::string& why_not) {
  const auto& trainer = context.trainer;
  if (!evidence.failure) {
    why_not = "run " + std::to_string(evidence.run_id) + " passed every detector";
    return std::nullopt;
  }
  const auto& failure = *evidence.failure;
  const int64_t shown = detectors::evidence_step(failure);
  if (detectors::is_curve(failure.kind)) {
    why_not = std::string(to_string(failure.kind)) +
              " is the whole curve's, judged from step 0 against the baseline";
    return std::nullopt;
  }
  const bool rate = failure.step <= 0 && shows_in_any_stretch(failure.kind);
  if ((failure.step <= 0 || shown <= 0) && !rate) {
    why_not = std::string(to_string(failure.kind)) + " is a property of the whole run";
    return std::nullopt;
  }
  if (!trainer.can(contract::Capability::Resume)) {
    // Not "the run has no checkpoint": it may have them (a later note says how to declare
    // `resume`).
    why_not = "the trainer cannot resume from a checkpoint";
    return std::nullopt;
  }
  // A rate (a straggler, a starved rank) is replayed over the run's last stretch of at least
  // kRateStretch steps that starts at a checkpoint: one interval, not the whole run again.
  // A kind judged against the steps before it (a loss spike against the recent losses) is
  // replayed from a checkpoint that many steps earlier: from the one just before the step, its
  // first loss would be the spike itself.
  const int64_t until = rate ? evidence.steps : shown;
  const int64_t history = detectors::history_needed(failure.kind, context.thresholds());
  const auto from = contract::last_before(evidence.checkpoints,
                                          rate ? until - kRateStretch + 1 : failure.step - history);
  if (!from) {
    if (rate)
      why_not = fmt::format(
          "run {} has no checkpoint {} steps or more before its end, where {} "
          "could be seen again",
          evidence.run_id, kRateStretch, to_string(failure.kind));
    else if (history > 0)
      why_not = fmt::format(
          "run {} has no checkpoint {} steps or more before step {} ({} judges "
          "a step against the {} before it)",
          evidence.run_id, history, failure.step, to_string(failure.kind), history);
    else
      why_not =
          fmt::format("run {} has no checkpoint before step {}", evidence.run_id, failure.step);
    // How the next such run costs one interval: a run writes checkpoints only when asked to.
    // One that wrote some, all too late, was asked: its first is said instead.
    if (!evidence.checkpoints.empty())
      why_not += fmt::format(" (its first is at step {})", evidence.checkpoints.front().step);
    else if (trainer.can(contract::Capability::Checkpoints))
      why_not +=
          " (--set " + trainer.checkpoint_every_key() + "=N makes a run write one every N steps)";
    return std::nullopt;
  }
  TrialSpec window =
      trainer.prefix(trainer.checkpoint_on_halt(trainer.resume(evidence.spec, from), true), until);
  if (failure.kind == detectors::FailureKind::Nonfinite) {
    // Full probes only where the stored records leave the first bad step open.
    const int64_t good =
        last_known_good(context.store, evidence.run_id, failure.step, evidence.checkpoints);
    window = trainer.full_probes_from(window, good + 1);
  }
  std::vector<TrialSpec> tries;
  const int ranks = evidence.spec.ranks;
  // One rank cannot show a rate that is one rank's against its peers.
  if (ranks > 1 && !rate && trainer.can(contract::Capability::Accumulate))
    tries.push_back(trainer.accumulate(window, 1, trainer.grad_accum(window) * ranks));
  tries.push_back(window);

  context.begin_phase("reproduce: replay steps " + std::to_string(from->step + 1) + ".." +
                          std::to_string(until) + " of run " + std::to_string(evidence.run_id) +
                          " from its checkpoint",
                      static_cast<int64_t>(tries.size()));
  for (const auto& spec : tries) {
    Outcome outcome = context.run(spec);
    if (outcome.verdict == Verdict::InfraError)
      throw_not_run(outcome, "the replay from checkpoint " + from->path);
    auto shown_again = failure_of(outcome, failure.kind);
    if (!shown_again && evidence.stopped_writing)
      shown_again = failure_of(outcome, detectors::FailureKind::Hang);
    // A kind judged against the steps before it can fire elsewhere in a replay that lacks the
    // run's earlier steps: that is not the failure found, and a finding must not move to it.
    if (shown_again && history > 0 && shown_again->step != failure.step) {
      why_not = fmt::format(
          "the replay of steps {}..{} at {} rank(s) showed {} at step {}, not at step {} (run {})",
          from->step + 1, until, spec.ranks, to_string(failure.kind), shown_again->step,
          failure.step, outcome.run_id);
      continue;
    }
    if (shown_again && outcome.verdict == Verdict::Fail)
      return Reproduction{spec, outcome, *shown_again, from};
    why_not = "the replay of steps " + std::to_string(from->step + 1) + ".." +
              std::to_string(until) + " at " + std::to_string(spec.ranks) +
              " rank(s) did not show " + to_string(failure.kind) + " (run " +
              std::to_string(outcome.run_id) + ")";
    // What it showed instead: a replay that died loading its checkpoint says so here.
    if (auto other = primary_failure(outcome.failures); other && outcome.verdict == Verdict::Fail)
      why_not += fmt::format("; it failed with {} at step {}: {}", to_string(other->kind),
                             other->step, other->detail);
  }
  return std::nullopt;
}

}  // namespace faultline::harness::isolate
