// `faultline bisect commits`: git's (or the flake-aware) bisection between good and bad, each
// proposal judged by CommitJudge, the state stored after every verdict so a killed run resumes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bisect/commit_graph.hpp"
#include "bisect/flaky_bisect.hpp"
#include "harness/commits/commit_judge.hpp"

namespace faultline::store {
class Store;
}

namespace faultline::harness {

enum class CommitSearch { Plain, Flaky };  // git's bisection | --flaky
// Whether the plain search first judges the range's ends (the bad commit must be bad, each good
// one good), or takes them as given as git does (--ends trust).
enum class RangeEnds { Check, Trust };

struct CommitBisectRequest {
  std::string repo;               // any directory inside the work tree
  std::vector<std::string> good;  // revisions known good (each an ancestor of bad)
  std::string bad;
  CommitSearch search = CommitSearch::Plain;
  bisect::FlakyOptions flaky;
  int jobs = 1;  // commits proposed per round; they are judged one after the other
  RangeEnds ends = RangeEnds::Check;
  CommitJudgeOptions judge;
};

enum class CommitAnswer {
  Culprit,       // the first bad commit (with --flaky: at the asked-for confidence)
  NoCulprit,     // --flaky: the failure of bad was itself a flake
  OnlySkipped,   // only skipped commits are left: any of `possible` may be the first bad one
  Inconsistent,  // the verdicts contradict a single culprit
  Unsure,        // --flaky: budget spent or nothing informative before the confidence
};
const char* to_string(CommitAnswer answer);

struct CommitBisectReport {
  CommitAnswer answer = CommitAnswer::Unsure;
  std::string culprit;                // Culprit, and Unsure's best guess
  std::string culprit_subject;        // the first line of its message
  std::vector<std::string> parents;   // the culprit's parents
  std::vector<std::string> possible;  // OnlySkipped
  std::optional<double> confidence;   // --flaky: the answer's posterior; plain: 1 if found
  int executions = 0;                 // verdicts the search took (cached ones included)
  int executed = 0, reused = 0;       // of those (and the baseline): run now / from store
  std::vector<std::string> skipped;   // commits judged skip, in order
  std::vector<bisect::CommitVerdicts> verdicts;  // runs per commit and what they said
  std::vector<CommitRun> runs;                   // every run, in order (the baseline first)
  std::size_t candidates = 0;                    // commits between good and bad at the start
  std::string good_commit, bad_commit;           // the first good one, and bad, resolved
  int64_t search_id = 0;
  bool resumed = false;
  // --kind loss_regression: the share of the good commit's seeds that fail against the others,
  // and the P(a good commit fails a run) the flaky search used (at least that share).
  std::optional<double> seed_flake_rate,
      p_good_looks_bad;  // a stored, unfinished search with the same inputs was picked up
};

// Called after every run (cached or not) once it is observed, with the runs so far, the
// candidates at the start, and the candidates left (nullopt: the flaky search weighs them all).
using CommitProgress = std::function<void(const CommitRun& run, int index, std::size_t total,
                                          std::optional<std::size_t> left)>;

// UserError for a bad repo, an unknown revision, a good that is not an ancestor of bad, or
// (RangeEnds::Check) a bad commit that passes or a good one that fails;
// BisectAborted and Interrupted as CommitJudge::judge throws them.
CommitBisectReport bisect_commits(store::Store& store, const CommitBisectRequest& request,
                                  const CommitProgress& progress);

}  // namespace faultline::harness
