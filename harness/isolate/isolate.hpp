// The isolate pipeline: reproduce a failure, shrink its scale, find its first bad step, the
// module and samples inside that step, and (with a known-good baseline) the config keys that
// cause it; then store a finding with its evidence and a repro spec. DESIGN.md, "The isolate
// pipeline". Each phase asks bisect/'s state machines what to run; every trial goes through the
// trial cache, so running a killed isolate again repeats no finished trial.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/trial/trial.hpp"
#include "harness/trial/trial_cache.hpp"
#include "store/store.hpp"

namespace faultline::harness {

// The phase that runs the known-good setup; a report finds the baseline curve by it.
inline constexpr const char* kBaselinePhase = "config: baseline";

// Which phases run: `isolate` runs them all; `bisect steps|data|config` one axis.
enum class IsolateScope { All, Steps, Data, Config };

struct IsolateRequest {
  TrialSpec failing;                  // the recipe, its overrides, its ranks; the whole run
  std::optional<TrialSpec> baseline;  // a setup known to be good (for the config phase)
  int64_t from_run = 0;               // > 0: start from this stored failing run
  IsolateScope scope = IsolateScope::All;
  int jobs = 1;  // trials run at once where a search proposes several
};

struct Scale {
  int ranks = 1;
  int64_t from_step = 0;  // the checkpoint it starts from (0: step 0)
  int64_t steps = 0;      // the last step it runs (to_step)
  double data_fraction = 1;
};

struct ConfigChange {
  std::string key;
  std::string baseline;  // TOML literal of the baseline's value
  std::string failing;   // ... and of the failing setup's
};

struct Finding {
  detectors::FailureKind kind = detectors::FailureKind::Crash;
  int64_t step = -1;  // first bad step; -1: not localized to a step
  int rank = -1;
  std::vector<int> ranks;  // every rank to blame (rank_divergence: the odd ones out)
  std::string host;        // the host to blame, "" when unknown or not host-tied
  std::string phase;       // an AnomalyPhase (to_string), a trainer's own phase, or ""
  std::string where;       // module or parameter, "" when unknown
  std::string detail;
  std::optional<std::vector<uint64_t>> samples;  // nullopt: not sample-specific / not searched
  std::vector<std::string> shards;
  std::optional<std::vector<ConfigChange>> config_culprit;  // nullopt: no baseline given
  std::optional<Scale> min_scale;
  TrialSpec repro;           // the minimal reproduction
  int64_t evidence_run = 0;  // the stored run `repro` replays
  nlohmann::json evidence;   // metrics around the step, host facts
  int64_t trials = 0, trials_reused = 0, steps_executed = 0, rank_steps_executed = 0;
  std::vector<std::string> skipped;  // axes not searched, and why
};

nlohmann::json to_json(const Finding& finding);  // the fields stored with a finding
// The trials a search ran, in order, as stored with it: one object per trial with its phase, run,
// verdict, reused, steps_run and wall_s. Empty for a search that keeps none (commit bisection,
// and isolate before it kept one).
nlohmann::json stored_timeline(const store::SearchInfo& search);
// The trainer command a person pastes to reproduce a finding, from its stored repro: the shell
// text stored with it (a loop over the ranks for several), else, for a finding stored before it
// had one, its argv quoted.
std::string pasted_repro_command(const nlohmann::json& repro);
nlohmann::json spec_to_json(const TrialSpec& spec);
TrialSpec spec_from_json(const nlohmann::json& json);

enum class IsolateStatus { Localized, NotReproduced };

// The user interrupted (SIGINT/SIGTERM) while a trial ran: the search stops, its trials so far
// stay stored and cached, and running the same command again resumes it.
struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted") {}
};

struct IsolateResult {
  IsolateStatus status = IsolateStatus::NotReproduced;
  Finding finding;
  int64_t finding_id = 0;
  bool already_stored = false;  // the same finding was stored by an earlier search: finding_id
  int64_t search_id = 0;
  std::string message;  // why not reproduced
};

// One progress line's content: the phase, trial k of about n, steps spent so far.
enum class ProgressEvent { PhaseStarted, TrialDone, Skipped };
struct Progress {
  ProgressEvent event = ProgressEvent::TrialDone;
  std::string phase;
  int64_t trial = 0;
  int64_t expected_trials = 0;  // 0: unknown
  int64_t steps = 0;
  std::string note;
};
using ProgressSink = std::function<void(const Progress&)>;

struct IsolateOptions {
  std::string trainer;               // for the repro argv
  std::string work_dir;              // scratch files (recipes rebuilt from stored runs)
  int64_t checkpoints_per_run = 10;  // checkpoint_every = ceil(steps / this)
};

namespace isolate {
class Context;
struct RankLocation;
}  // namespace isolate

class Isolator {
 public:
  Isolator(store::Store& store, TrialCache& cache, IsolateOptions options, ProgressSink progress);
  IsolateResult run(const IsolateRequest& request);

 private:
  using SearchCheckpoint = std::function<void(const std::string&, store::SearchStatus)>;
  IsolateResult store_finding(isolate::Context& context, IsolateResult& result,
                              nlohmann::json& state, const SearchCheckpoint& checkpoint,
                              const std::string& note);
  IsolateResult store_rank_finding(isolate::Context& context, IsolateResult& result,
                                   nlohmann::json& state, const SearchCheckpoint& checkpoint,
                                   const isolate::RankLocation& location,
                                   const Outcome& failing_run);

  store::Store& store_;
  TrialCache& cache_;
  IsolateOptions options_;
  ProgressSink progress_;
};

}  // namespace faultline::harness
