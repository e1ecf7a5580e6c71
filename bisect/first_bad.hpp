// First-bad search over an ordered axis of candidates (steps, commits, checkpoints): a resumable
// bisection that routes around skipped points and can propose k points per round.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "bisect/observation.hpp"

namespace faultline::bisect {

// Whether the last candidate (N-1) is already known bad. It usually is: it is the observed
// failure, and bisecting it again would waste a trial.
enum class LastCandidate { KnownBad, Unknown };

// Whether the state before candidate 0 is known good. It only changes what the result claims:
// a first bad of 0 with an unknown "before" may mean the fault predates the axis.
enum class BeforeFirst { KnownGood, Unknown };

struct FirstBadOptions {
  LastCandidate last_candidate = LastCandidate::KnownBad;
  BeforeFirst before_first = BeforeFirst::KnownGood;
};

enum class FirstBadOutcome {
  Exact,      // first_bad is set
  Ambiguous,  // only skipped candidates separate the last good from the first bad
  None,       // every candidate is good (only when the last candidate is not known bad)
};

struct FirstBadResult {
  FirstBadOutcome outcome = FirstBadOutcome::Ambiguous;
  std::optional<size_t> first_bad;
  // Candidates that may be the first bad, half-open [range_begin, range_end). Exact: one
  // candidate. Ambiguous: the skipped ones plus the first bad. None: empty, at N.
  size_t range_begin = 0;
  size_t range_end = 0;
  // The predicate at the edges: lower_edge is Good when the point just below the range was
  // observed good (or is "before 0", assumed good), Skip when nothing below is known to be good.
  // upper_edge is Bad when the range ends in a known bad point (observed, or the assumed last
  // candidate), Skip when no bad point is known at all.
  Observation lower_edge = Observation::Skip;
  Observation upper_edge = Observation::Skip;
};

class FirstBad {
 public:
  // candidate_count >= 1; candidates are indices 0..candidate_count-1 into a caller-owned axis.
  explicit FirstBad(size_t candidate_count, FirstBadOptions options = {});

  // Up to `slots` candidates to evaluate now. With slots = K the points split the open range
  // into K+1 near-equal parts. Empty when done, or while proposed points inside the open range
  // are still outstanding (a round is in flight).
  std::vector<size_t> next(size_t slots = 1);

  // Records the predicate at a proposed candidate; any order. A repeat that agrees is ignored;
  // a disagreeing repeat or a never-proposed candidate is std::logic_error; a result that
  // breaks monotonicity (good above a bad) is std::invalid_argument.
  void observe(size_t candidate, Observation observation);

  bool done() const;
  FirstBadResult result() const;  // meaningful once done(); before that, the current bounds
  size_t evaluations() const { return observed_.size(); }
  size_t candidate_count() const { return candidate_count_; }
  const FirstBadOptions& options() const { return options_; }
  // Observations so far, by candidate (used by callers that map results onto their axis).
  const std::map<size_t, Observation>& observed() const { return observed_; }

  // The observed points only: proposed-but-unobserved points are lost on purpose and are
  // proposed again after from_json.
  nlohmann::json to_json() const;
  static FirstBad from_json(const nlohmann::json& state);

 private:
  // Open range (last_good_, first_bad_) holds the candidates not yet decided. last_good_ is -1
  // when no candidate is known good; first_bad_ is N when no candidate is known bad.
  int64_t open_begin() const { return last_good_ + 1; }
  bool pending_inside_open_range() const;
  std::optional<size_t> nearest_unobserved(int64_t target, const std::set<size_t>& taken) const;
  void record(size_t candidate, Observation observation);

  size_t candidate_count_;
  FirstBadOptions options_;
  std::map<size_t, Observation> observed_;
  std::set<size_t> pending_;
  int64_t last_good_ = -1;
  int64_t first_bad_;
};

}  // namespace faultline::bisect
