// Flake-aware commit bisection: a Bayesian search over "which commit is the culprit, or was
// the failure itself a flake", and the plain bisect-with-k-reruns it is measured against.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bisect/commit_graph.hpp"
#include "bisect/observation.hpp"

namespace faultline::bisect {

// The noise model (asymmetric, per recipe) and when to stop.
struct FlakyOptions {
  double p_bad_looks_good = 0.1;    // a commit that contains the regression passes by chance
  double p_good_looks_bad = 0.025;  // a clean commit fails by chance
  double prior_no_culprit = 0.1;    // P(the failure that started the hunt was itself a flake)
  double confidence = 0.99;         // stop once one hypothesis has this posterior
  int max_executions = 100;         // ... or after this many evaluations (skips included)
};

enum class FlakyAnswer { Culprit, NoCulprit };

enum class FlakyStop {
  Searching,
  Confident,          // the answer's posterior reached options.confidence
  BudgetSpent,        // max_executions reached first; the answer is the current best guess
  NothingInformative  // no testable commit can tell the leading hypotheses apart
};

struct FlakyBisectResult {
  FlakyStop stop = FlakyStop::Searching;
  FlakyAnswer answer = FlakyAnswer::NoCulprit;
  std::string culprit;               // answer == Culprit
  std::vector<std::string> parents;  // the culprit's parents, as given
  double confidence = 0.0;           // posterior of the answer
  int executions = 0;
  std::vector<std::string> skipped;
  std::vector<CommitVerdicts> verdicts;  // per commit, in the order first judged
};

// Hypotheses: "candidate k is the culprit" for each candidate of git's set (k is bad and so is
// every descendant), plus "no culprit". A run of c shows bad with probability
// 1 - p_bad_looks_good if the culprit is an ancestor-or-self of c, else p_good_looks_bad. Each
// proposal maximizes the expected information gain of its verdict; a commit may be re-run,
// the bad commit included (that is what can expose "no culprit").
class FlakyBisect {
 public:
  // Throws std::invalid_argument like CommitBisect, or for options outside their ranges
  // (noise in [0, 1) with p_bad_looks_good + p_good_looks_bad < 1, prior in [0, 1),
  // confidence in (0, 1], max_executions >= 1).
  FlakyBisect(std::vector<Commit> commits, std::vector<std::string> good, std::string bad,
              FlakyOptions options = {});

  // Up to `slots` distinct commits, most informative first, never more than the budget left.
  std::vector<std::string> next(std::size_t slots);
  // Throws std::logic_error for a commit that is not an outstanding proposal.
  void observe(const std::string& commit, Observation observation);
  bool done() const { return stop_ != FlakyStop::Searching; }
  FlakyBisectResult result() const;
  int evaluations() const { return static_cast<int>(log_.size()); }
  double posterior(const std::string& commit) const;  // P(commit is the culprit)
  double posterior_no_culprit() const { return no_culprit_; }

  static constexpr const char* kStateKind = "flaky_bisect";  // to_json's "kind"
  nlohmann::json to_json() const;
  static FlakyBisect from_json(const nlohmann::json& state);  // std::invalid_argument if bad

 private:
  void apply(std::size_t node, Observation observation);
  void refresh();

  CommitGraph graph_;
  std::vector<std::string> initial_good_;
  std::string initial_bad_;
  FlakyOptions options_;
  std::vector<char> in_set_, skipped_;
  std::vector<std::size_t> list_;  // candidates, oldest first (ties go to the older commit)
  std::vector<double> culprit_;    // posterior per node (0 outside the candidates)
  double no_culprit_ = 0.0;
  std::vector<double> gain_;  // expected information (bits) of one more run, per node
  FlakyStop stop_ = FlakyStop::Searching;
  std::vector<std::pair<std::string, Observation>> log_;
  std::vector<std::size_t> pending_, reissue_;
};

// The baseline: git's bisection where every probe is run `reruns` times and judged by
// majority (a tie, or all skips, counts as skip). It cannot answer "no culprit".
class MajorityBisect {
 public:
  MajorityBisect(std::vector<Commit> commits, std::vector<std::string> good, std::string bad,
                 int reruns);  // std::invalid_argument if reruns < 1

  // The current probe, once per free slot, up to the runs it still needs.
  std::vector<std::string> next(std::size_t slots);
  void observe(const std::string& commit, Observation observation);  // std::logic_error
  bool done() const { return inner_.done(); }
  // The inner search's result with every run counted in verdicts and evaluations.
  CommitBisectResult result() const;
  int evaluations() const { return static_cast<int>(runs_.size()); }

  static constexpr const char* kStateKind = "majority_bisect";  // to_json's "kind"
  nlohmann::json to_json() const;
  static MajorityBisect from_json(const nlohmann::json& state);  // std::invalid_argument

 private:
  MajorityBisect(CommitBisect inner, int reruns);

  CommitBisect inner_;
  int reruns_;
  std::optional<std::string> probe_;   // the commit being re-run, if any
  int good_ = 0, bad_ = 0, skip_ = 0;  // votes on the probe so far
  int outstanding_ = 0;                // runs of the probe handed out, not yet observed
  int reissue_ = 0;                    // of those, restored from JSON and not handed out again
  std::vector<std::pair<std::string, Observation>> runs_;
};

}  // namespace faultline::bisect
