// The phases of the isolate pipeline and what they share (internal to harness/). Each phase
// builds trial specs, asks a bisect/ search which to run, and reads the outcomes; none prints.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/isolate.hpp"
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
  // Runs it again even when a stored result exists (votes over identical trials).
  Outcome run_again(const TrialSpec& spec) {
    return run(std::vector<TrialSpec>{spec}, CacheUse::Rerun).at(0);
  }
  int jobs() const { return jobs_; }

  store::Store& store;
  const IsolateOptions& options;
  int64_t trials = 0, trials_reused = 0, steps_executed = 0;

 private:
  TrialCache& cache_;
  const ProgressSink& progress_;
  int jobs_;
  std::string phase_;
  int64_t phase_trials_ = 0, expected_ = 0;
};

// A trial outcome judged against the failure being isolated.
bool shows(const Outcome& outcome, const std::string& kind);
std::optional<detectors::Failure> failure_of(const Outcome& outcome, const std::string& kind);
// The failure to isolate: the earliest by step; ties go to the better-localized kind.
std::optional<detectors::Failure> primary_failure(const std::vector<detectors::Failure>& failures);

// Checkpoints a trial wrote, by step (ascending), and the path of one.
std::vector<int64_t> checkpoint_steps(const Outcome& outcome);
std::string checkpoint_path(const Outcome& outcome, int64_t step);

// Returns spec with extra overrides appended (later --set wins).
TrialSpec with(TrialSpec spec, const std::vector<std::string>& overrides);

// Global sample indices as probe.replay_samples spells them: "3,17,42".
std::string sample_list(const std::vector<uint64_t>& samples);

// 1. The failing setup, run with checkpoints.
struct Reproduction {
  TrialSpec spec;
  Outcome outcome;
  detectors::Failure failure;
};
// `ran` is the run either way (a multi-rank run that passed may still have diverging ranks).
std::optional<Reproduction> reproduce(Context& context, const TrialSpec& failing,
                                      std::optional<std::string> expected_kind,
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
std::optional<detectors::Failure> check_determinism(Context& context, const ScaledDown& scaled);
std::optional<detectors::Failure> vote_on_reproduction(Context& context, const TrialSpec& spec,
                                                       const std::string& kind);

// 3. The first bad step, and for a non-finite value its phase and module (full probes replayed
// in the window before the step only).
struct StepLocation {
  int64_t step = -1;
  std::string phase, where, detail;
  std::optional<std::vector<uint64_t>> sample_hint;  // rows the forward probe named
  std::string state_before;  // checkpoint of step - 1 ("" when the step is 1: a fresh start)
};
StepLocation locate_step(Context& context, const TrialSpec& local_spec, const Outcome& local,
                         const detectors::Failure& failure);

// 4. The samples of that step's batch the failure needs (nullopt: any sample shows it).
struct SampleLocation {
  std::optional<std::vector<uint64_t>> samples;
  std::vector<std::string> shards;
};
SampleLocation locate_samples(Context& context, const TrialSpec& local_spec, const Outcome& local,
                              const StepLocation& location, const std::string& kind);

// 2c. Ranks that disagree (silent corruption): the first step whose update leaves a 1-rank
// replay of the same global batches, then a replica check there (every rank fed the same batch,
// from the state before the step) against a 1-rank replay of that batch; with spare host labels,
// ddmin over the hosts taking part names the host. nullopt: the ranks agree.
struct RankLocation {
  int64_t step = -1;
  std::vector<int> ranks;  // the odd ranks out
  std::string host;        // the host to blame ("" when not one host, or not host-tied)
  std::string detail;
  nlohmann::json evidence;  // the per-rank table, the tolerance and the measured floor
  TrialSpec replica_spec;   // the minimal reproduction: the replica check
  Outcome replica_outcome;
};
std::optional<RankLocation> locate_diverging_ranks(Context& context, const TrialSpec& spec,
                                                   const Outcome& outcome);

// 5. The 1-minimal set of config changes from the baseline that makes it fail.
std::vector<ConfigChange> config_culprit(Context& context, const TrialSpec& failing,
                                         const TrialSpec& baseline, const Scale& scale,
                                         const detectors::Failure& failure);

}  // namespace faultline::harness::isolate
