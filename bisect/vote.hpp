// Repeated identical trials of one suspect point with a vote, for points that may be flaky:
// the majority verdict plus whether the trials disagreed (nondeterminism, a finding of its own).
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "bisect/observation.hpp"

namespace faultline::bisect {

// WhenDecided: stop as soon as one side has the needed votes (or neither still can).
// AllRuns: always run max_runs trials, to measure how often the trials disagree.
enum class StopRule { WhenDecided, AllRuns };

// Inconsistent: identical trials gave both Good and Bad (skips do not count).
enum class Consistency { Consistent, Inconsistent };

struct VoteOptions {
  size_t max_runs = 5;
  // Votes one side needs to win; 0 means a strict majority of max_runs. Must exceed
  // max_runs / 2 so that at most one side can ever reach it.
  size_t needed = 0;
  StopRule stop_rule = StopRule::WhenDecided;
};

struct VoteResult {
  Observation verdict = Observation::Skip;  // Good or Bad when a side won; Skip: undecided
  Consistency consistency = Consistency::Consistent;
  size_t good = 0;
  size_t bad = 0;
  size_t skipped = 0;
};

const char* to_string(Consistency consistency);

class Vote {
 public:
  explicit Vote(VoteOptions options = {});

  // Run numbers (0..max_runs-1) to start now: no more than could still change the verdict
  // (WhenDecided) or the runs left (AllRuns). Empty when done or while the outstanding runs
  // could decide it on their own.
  std::vector<size_t> next(size_t slots = 1);

  // Records the outcome of a proposed run; any order. A repeat that agrees is ignored; a
  // disagreeing repeat or a never-proposed run is std::logic_error.
  void observe(size_t run, Observation observation);

  bool done() const;
  VoteResult result() const;
  size_t evaluations() const { return runs_.size(); }
  const VoteOptions& options() const { return options_; }

  // Options and observed runs; runs outstanding when serialized are proposed again.
  nlohmann::json to_json() const;
  static Vote from_json(const nlohmann::json& state);

 private:
  size_t count(Observation observation) const;
  bool decided() const;

  VoteOptions options_;
  std::map<size_t, Observation> runs_;
  std::set<size_t> outstanding_;
};

}  // namespace faultline::bisect
