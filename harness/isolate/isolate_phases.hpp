// The phases of the isolate pipeline and what they share (internal to harness/). Each phase
// builds trial specs, asks a bisect/ search which to run, and reads the outcomes; none prints.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bisect/observation.hpp"
#include "harness/contract/trainer_contract.hpp"
#include "harness/isolate/isolate.hpp"
#include "probes/detectors/failure.hpp"

namespace faultline::harness::isolate {

// What every phase uses: the cache, progress reporting, counters.
class Context {
 public:
  Context(store::Store& store, TrialCache& cache, const IsolateOptions& options,
          const ProgressSink& progress, int jobs);
  void begin_phase(const std::string& phase, int64_t expected_trials);
  // Runs specs (up to `jobs` at a time), in order of the returned outcomes.
  std::vector<Outcome> run(const std::vector<TrialSpec>& specs, CacheUse use = CacheUse::Reuse);
  Outcome run(const TrialSpec& spec) { return run(std::vector<TrialSpec>{spec}).at(0); }
  // The k-th identical run of spec after the first (votes, determinism): cached as its own
  // trial, so a resumed search does not run it again.
  Outcome run_again(TrialSpec spec, int k) {
    spec.repeat = k;
    return run(spec);
  }
  int jobs() const { return jobs_; }
  const detectors::Thresholds& thresholds() const { return cache_.runner().options().thresholds; }
  // From now on every trial is also judged against this run's losses (loss_regression).
  void judge_against(int64_t reference_run) {
    cache_.judge_against(reference_run);
    loss_reference_run = reference_run;
  }
  // An axis not searched, and why: shown as progress and kept with the finding.
  void skip(const std::string& why);

  std::vector<std::string> skipped;

  store::Store& store;
  const IsolateOptions& options;
  // The trainer of the setup being isolated (set once the setup is known).
  contract::TrainerContract trainer = contract::TrainerContract::bundled();
  int64_t trials = 0, trials_reused = 0, steps_executed = 0, rank_steps_executed = 0;
  // The run judge_against named (0: none), kept with a loss_regression finding so that `repro`
  // judges its replay against the same losses.
  int64_t loss_reference_run = 0;
  // Every trial in the order it ran: its phase, run, verdict, cost and whether the cache served
  // it; stored with the search so `faultline report` can draw the search as a timeline.
  nlohmann::json timeline = nlohmann::json::array();

 private:
  TrialCache& cache_;
  const ProgressSink& progress_;
  int jobs_;
  std::string phase_;
  int64_t phase_trials_ = 0, expected_ = 0;
};

// A trial outcome judged against the failure being isolated.
bool shows(const Outcome& outcome, detectors::FailureKind kind);
// The one judgement every search uses: Bad shows the failure, Good passed, Skip is anything
// else (another failure, or it could not run: no evidence either way).
bisect::Observation judge(const Outcome& outcome, detectors::FailureKind kind);
std::optional<detectors::Failure> failure_of(const Outcome& outcome, detectors::FailureKind kind);
// " (nonfinite at step 30)": the first failure of a failing trial, for its progress line.
std::string first_failure_text(const Outcome& outcome);
// The failure to isolate: the earliest by step; ties go to the better-localized kind.
std::optional<detectors::Failure> primary_failure(const std::vector<detectors::Failure>& failures);

// The checkpoints a trial's events name (the one it resumed from, those it wrote), by step.
std::vector<contract::Checkpoint> checkpoints_of(Context& context, const Outcome& outcome);
std::vector<int64_t> steps_of(const std::vector<contract::Checkpoint>& checkpoints);

// 1. The failing setup, run with checkpoints: a replay from a stored run's checkpoint, or the
// whole run from step 0.
struct Reproduction {
  TrialSpec spec;
  Outcome outcome;
  detectors::Failure failure;
  std::optional<contract::Checkpoint> from;  // the checkpoint it resumed from; nullopt: step 0
};

// 0. A stored failing run's own evidence: its failure (from the stored records), its setup and
// the checkpoints its events name.
struct Evidence {
  int64_t run_id = 0;
  TrialSpec spec;      // its resolved config, written back as a recipe, at its ranks
  std::string recipe;  // the run's own recipe ("" when it had none: an imported plain run)
  std::optional<detectors::Failure> failure;  // nullopt: a passing multi-rank run (rank check)
  std::vector<contract::Checkpoint> checkpoints;
  int64_t steps = 0;  // the steps it ran
  // An imported run's crash is a rank that stopped writing, with no exit status to say why: a
  // replay that hangs where it stopped shows the same failure, better named.
  bool stopped_writing = false;
};
Evidence load_evidence(Context& context, int64_t run_id);

// `isolate --run`: the stored run's evidence, and the failure kind a replay must show. A failure
// judged against a reference (a loss regression) has none: the baseline judges it, so one is
// required, and `worse_than_reference` says to go straight to it. A baseline given as keys only
// (--baseline-set) is completed here from the stored run's config.
struct StoredStart {
  Evidence evidence;
  std::optional<detectors::FailureKind> expected_kind;
  bool worse_than_reference = false;
};
StoredStart start_from_run(Context& context, int64_t run_id, std::optional<TrialSpec>& baseline);
// The stored run as an outcome the rank search can compare with (it ran nothing new).
Outcome stored_outcome(Context& context, const Evidence& evidence);
// The failure replayed from the last checkpoint before it, to the step that shows it: on one
// rank with N-fold accumulation first, then at the run's own ranks. A rate over the whole run (a
// straggler, a starved rank) is replayed at the run's ranks over its last stretch of 50 steps or
// more from a checkpoint. nullopt (and why) when no checkpoint precedes it or neither replay
// shows it; the caller then runs from step 0.
std::optional<Reproduction> replay_evidence(Context& context, const Evidence& evidence,
                                            std::string& why_not);
// The stored run's setup as phase 1 reproduces it from step 0: up to the step that showed its
// failure when that failure is tied to a step (a NaN at step 500 of a 100k-step job needs 500
// steps, not the job), else the whole run.
TrialSpec up_to_its_failure(const Context& context, const Evidence& evidence);
// `ran` is the run either way (a multi-rank run that passed may still have diverging ranks).
std::optional<Reproduction> reproduce(Context& context, const TrialSpec& failing,
                                      std::optional<detectors::FailureKind> expected_kind,
                                      std::string& why_not, Outcome& ran);

// 2. The smallest ranks × steps × data that still fails. `local` is the smallest-rank run at the
// original data: later phases replay from its checkpoints, so steps and samples are the user's.
struct ScaledDown {
  Scale scale;
  TrialSpec local_spec;
  Outcome local_outcome;
  detectors::Failure local_failure;
  TrialSpec repro_spec;  // at `scale`
  Outcome repro_outcome;
};
ScaledDown scale_down(Context& context, const Reproduction& reproduction);

// 2b. Identical trials agree: a prefix of the minimal reproduction, run again, must be bitwise
// the same (else a `nondeterministic` failure), and a stored failure that did not come back is
// voted on over identical re-runs (a `nondeterministic` failure when they disagree).
// `stored_run`: the stored run the reproduction replays (0: none); at the same ranks and on the
// same machine facts its records are the first run to compare with, at no cost.
std::optional<detectors::Failure> check_determinism(Context& context, const ScaledDown& scaled,
                                                    int64_t stored_run);
// A timing failure (straggler, data_stall, slow) counts only if most identical runs show it:
// the reproduction is the first vote. Returns why not when they do not.
std::optional<std::string> confirm_timing(Context& context, const Reproduction& reproduction);
std::optional<detectors::Failure> vote_on_reproduction(Context& context, const TrialSpec& spec,
                                                       detectors::FailureKind kind);

// The last step before `step` known good: finite on every rank in the run's records, or the
// checkpoint (before `step`) it resumed from.
int64_t last_known_good(store::Store& store, int64_t run_id, int64_t step,
                        const std::vector<contract::Checkpoint>& checkpoints);

// 3. The first bad step, and for a non-finite value its phase and module (full probes replayed
// in the window before the step only).
struct StepLocation {
  int64_t step = -1;
  std::string phase, where, detail;
  std::optional<std::vector<uint64_t>> sample_hint;  // rows the forward probe named
  std::string state_before;  // checkpoint of step - 1 ("" when the step is 1: a fresh start)
  int64_t shown_in = 0;      // the run whose full probes showed the step (0: none)
};
StepLocation locate_step(Context& context, const TrialSpec& local_spec, const Outcome& local,
                         const detectors::Failure& failure);

// 4. The samples of that step's batch the failure needs (nullopt: any sample shows it).
struct SampleLocation {
  std::optional<std::vector<uint64_t>> samples;
  std::vector<std::string> shards;
};
SampleLocation locate_samples(Context& context, const TrialSpec& local_spec, const Outcome& local,
                              const StepLocation& location, detectors::FailureKind kind);

// 2c. Ranks that disagree (silent corruption): the first step where the ranks' own parameters
// part, or else whose update leaves a 1-rank replay of the same global batches, then a replica
// check there (every rank fed the same batch, from the state before the step) against a 1-rank
// replay of that batch; with spare host labels, ddmin over the hosts taking part names the host.
// nullopt: the ranks agree.
struct RankLocation {
  int64_t step = -1;
  std::vector<int> ranks;          // the odd ranks out
  std::string host;                // the host to blame ("" when not one host, or not host-tied)
  std::string phase = "backward";  // "optimizer": the same gradients, another update
  std::string detail;
  nlohmann::json evidence;   // the per-rank table, the tolerance and the measured floor
  TrialSpec replica_spec;    // the minimal reproduction: the replica check
  int64_t replica_from = 0;  // the step of the checkpoint it resumes from (0: step 0)
  Outcome replica_outcome;
};
std::optional<RankLocation> locate_diverging_ranks(Context& context, const TrialSpec& spec,
                                                   const Outcome& outcome);

// 1b. A failing setup that passed every detector, judged against the baseline: the baseline run
// at the failing setup's ranks and steps becomes the reference every later trial's loss curve is
// judged against, and the failing setup runs again. nullopt (why_not extended) when the baseline
// did not pass or the failing setup trains no worse than it.
std::optional<Reproduction> reproduce_against_baseline(Context& context, const TrialSpec& failing,
                                                       const TrialSpec& baseline,
                                                       std::string& why_not, Outcome& ran);

// The config keys (training keys, not watch-only ones) where the failing setup differs from the
// baseline. A baseline that differs in none computes the same thing: a UserError, before any
// trial runs.
std::vector<ConfigChange> config_differences(const Context& context, const TrialSpec& failing,
                                             const TrialSpec& baseline);

// 5. The 1-minimal set of config changes from the baseline that makes it fail.
std::vector<ConfigChange> config_culprit(Context& context, const TrialSpec& failing,
                                         const TrialSpec& baseline, const Scale& scale,
                                         const detectors::Failure& failure);

}  // namespace faultline::harness::isolate
