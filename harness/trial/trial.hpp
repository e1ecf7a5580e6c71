// One supervised, stored, judged trainer run: a TrialSpec in, an Outcome out. Every expected
// failure (crash, hang, non-finite loss, the launcher failing) is a value in the Outcome.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/launch/launcher.hpp"
#include "harness/launch/supervisor.hpp"
#include "harness/trial/trial_observer.hpp"
#include "probes/detectors/failure.hpp"
#include "probes/detectors/thresholds.hpp"
#include "store/store.hpp"

namespace faultline::harness {

struct TrialSpec {
  std::string config_path;             // the trainer recipe
  std::vector<std::string> overrides;  // --set, applied before the trial's own keys
  int ranks = 1;
  int64_t stop_after = 0;    // 0: the recipe's whole run; else a prefix of it (train.stop_after)
  double data_fraction = 0;  // 0: the recipe's own
  std::string resume;        // a checkpoint, or ""
  // The step whose state `resume` holds, when known (0: unknown): a rank whose first step
  // record is at or before it did not resume, whatever it said. Not part of a trial's identity.
  int64_t resume_step = 0;
  std::string parent;  // stored with the run, e.g. "smoke"
  // The host label of each rank (FAULTLINE_HOST), by rank; empty or short: the machine's own
  // name for the ranks not listed. On one machine labels stand for hosts (docs/ranks.md).
  std::vector<std::string> hosts;
  int repeat = 0;  // > 0: the k-th identical run of this spec again (never changes its command)
};

enum class Verdict { Pass, Fail, Skip, InfraError };
const char* to_string(Verdict verdict);
// The verdict a stored run or trial holds in to_string's words; nullopt for any other text
// (the store keeps "" for a run still running).
std::optional<Verdict> parse_verdict(std::string_view text);

// One rank's metrics lines that were not the protocol: counted and reported, never fatal. The
// store keeps them with the run in the same shape.
using MalformedLines = store::RankMalformed;

// Why a run could not be judged: the machine or set-up, or bad input to the command, which no
// retry on another machine mends — the trainer refusing what it was asked (its usage error,
// exit 2 before its first step), a script that does not parse, a trainer that ignored the
// checkpoint it was asked to resume from.
enum class InfraCause { Machine, BadInput };

struct Outcome {
  Verdict verdict = Verdict::InfraError;
  std::vector<detectors::Failure> failures;
  int64_t run_id = 0;
  std::string infra_detail;                      // why it could not run, with the log's tail
  InfraCause infra_cause = InfraCause::Machine;  // read only for Verdict::InfraError
  std::string out_dir;
  int64_t last_step = 0;
  int64_t steps_run = 0;  // trainer steps this trial executed (per rank)
  int ranks = 1;          // its world size: steps_run × ranks is its cost in rank-steps
  std::optional<double> first_loss, last_loss;
  double tokens_per_s = 0;
  int64_t skipped_steps = 0;  // steps a loss scaler skipped (fp16 overflow), most of any rank
  double wall_s = 0;
  double queue_wait_s = 0;  // launch to the first rank starting (a Slurm job's time in queue)
  // Its run time: wall_s less the queue wait.
  double run_s() const { return wall_s > queue_wait_s ? wall_s - queue_wait_s : 0; }
  bool interrupted = false;
  std::vector<MalformedLines> malformed;  // ranks with any, by rank; also stored with the run
};

// Ends a search at a trial that could not run, `what` naming it ("the failing setup"): bad
// input (UserError) where the trainer refused what it was asked, else an InfraError.
[[noreturn]] void throw_not_run(const Outcome& outcome, const std::string& what);

struct RunnerOptions {
  std::string trainer;   // path of faultline-train (or a protocol-speaking trainer)
  std::string work_dir;  // runs go to <work_dir>/run-<id>/
  SuperviseOptions supervise;
  detectors::Thresholds thresholds;
  const std::atomic<bool>* interrupted = nullptr;  // set by a SIGINT handler
  TrialObserver* observer = nullptr;               // progress lines; null: none
  // Each run is also judged against these runs' step records (loss_regression); null: none.
  std::shared_ptr<const std::vector<std::vector<StepRecord>>> reference;
};

class TrialRunner {
 public:
  TrialRunner(store::Store& store, Launcher& launcher, RunnerOptions options);
  // `with_finish` runs inside the transaction that marks the run finished, on the same store:
  // what a caller stores of the outcome (the trial cache's row) lands with it or not at all, so
  // a search killed in between never finds a finished run it has no trial for.
  Outcome run(const TrialSpec& spec,
              const std::function<void(const Outcome&)>& with_finish = nullptr);
  const RunnerOptions& options() const { return options_; }
  // From now on every run is also judged against these runs' step records (loss_regression).
  void judge_against(std::shared_ptr<const std::vector<std::vector<StepRecord>>> reference) {
    options_.reference = std::move(reference);
  }
  Launcher& launcher() const { return launcher_; }

 private:
  store::Store& store_;
  Launcher& launcher_;
  RunnerOptions options_;
};

// The trial's overrides: the spec's own, then its scale (stop_after, data fraction, ranks).
std::vector<std::string> trial_overrides(const TrialSpec& spec);

// Stored run `run_id` judged against a reference's runs (their step records): a loss_regression
// when it trains worse, with the detector on; nullopt otherwise, or without a reference.
std::optional<detectors::Failure> regression_against(
    const store::Store& store, int64_t run_id,
    const std::shared_ptr<const std::vector<std::vector<StepRecord>>>& reference,
    const detectors::Thresholds& thresholds);

// A judged failure as a run's row stores it (its kind as text).
store::RunFailure stored_failure(const detectors::Failure& failure);

// The trainer command line of a trial, without --out (what a finding's repro says).
std::vector<std::string> trainer_argv(const TrialSpec& spec, const std::string& trainer);

}  // namespace faultline::harness
