// Trials cached by the content hash of what decides their result (recipe text, overrides, scale,
// the checkpoint resumed from, the trainer binary): a search that is killed and run again finds
// every finished trial here instead of running it twice.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/trial/trial.hpp"

namespace faultline::store {
// A run's malformed-lines count as cached outcomes and --json documents carry it.
void to_json(nlohmann::json& json, const RankMalformed& malformed);
void from_json(const nlohmann::json& json, RankMalformed& malformed);
}  // namespace faultline::store

namespace faultline::harness {

// The spec as stored, with the facts that decide its result (content hashes, not just paths).
// `reference`: the digest of the runs its loss is judged against ("": none).
nlohmann::json trial_identity(const TrialSpec& spec, const std::string& trainer,
                              const std::string& judge, const std::string& reference = "");
std::string trial_hash(const nlohmann::json& identity);
// A digest of the losses of reference runs (what a loss_regression verdict depends on).
std::string reference_digest(const std::vector<std::vector<StepRecord>>& reference);

nlohmann::json to_json(const Outcome& outcome);
Outcome outcome_from_json(const nlohmann::json& json);

// Written by `faultline gc` into a run directory it kept but took checkpoints from: later trials
// may resume from any of a run's checkpoints, so such a run is no longer reused.
constexpr const char* kPrunedNote = "faultline-gc.txt";

enum class CacheUse { Reuse, Rerun };  // Rerun: run it again and replace the stored result

struct CachedOutcome {
  Outcome outcome;
  bool from_cache = false;
};

// Wraps a TrialRunner. Interrupted and infra_error outcomes are never reused: they say nothing
// about the spec.
class TrialCache {
 public:
  // `judge`: what else decides a verdict (detector thresholds, timeouts), as text.
  TrialCache(store::Store& store, TrialRunner& runner, std::string trainer, std::string judge);
  CachedOutcome run(const TrialSpec& spec, CacheUse use = CacheUse::Reuse);
  // The same for several specs, up to `jobs` at once (each in a thread with its own store handle
  // and launcher); outcomes in the order of `specs`.
  std::vector<CachedOutcome> run_all(const std::vector<TrialSpec>& specs, int jobs,
                                     CacheUse use = CacheUse::Reuse);

  // Every later trial is judged against this stored run's step records (loss_regression), and
  // cached apart from the same spec judged without them or against another run.
  void judge_against(int64_t reference_run);

  const TrialRunner& runner() const { return runner_; }
  int64_t trials_run() const { return trials_run_; }
  int64_t trials_reused() const { return trials_reused_; }
  int64_t steps_executed() const { return steps_executed_; }  // by trials run, not reused

 private:
  std::optional<Outcome> stored(const std::string& hash) const;
  // trial_identity with where the runner's launcher places trials (a Slurm trial on other nodes
  // was reused from the store: --hosts, launcher.nodelist had no effect on a repeated search).
  nlohmann::json identity_of(const TrialSpec& spec) const;
  store::Store& store_;
  TrialRunner& runner_;
  std::string trainer_;
  std::string judge_;
  std::string reference_;  // digest of the reference's losses, "" when none
  int64_t trials_run_ = 0, trials_reused_ = 0, steps_executed_ = 0;
};

}  // namespace faultline::harness
