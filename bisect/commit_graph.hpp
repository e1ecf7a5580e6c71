// A commit DAG handed in as data, and git-compatible bisection over it (`git bisect`,
// `git rev-list --bisect`) as a resumable state machine. Nothing here runs git.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bisect/observation.hpp"

namespace faultline::bisect {

struct Commit {
  std::string id;
  std::vector<std::string> parents;
};

// The DAG with indices. Commits should come in rev-list order (newest first, as
// `git rev-list --parents` prints them): that order only breaks ties, the way git's does.
// A parent missing from the list is the history's boundary and is dropped.
class CommitGraph {
 public:
  // Throws std::invalid_argument on no commits, an empty or repeated id, or a cycle.
  explicit CommitGraph(std::vector<Commit> commits);

  std::size_t size() const { return commits_.size(); }
  const std::vector<Commit>& commits() const { return commits_; }
  const std::string& id(std::size_t node) const { return commits_[node].id; }
  bool contains(const std::string& id) const { return index_.count(id) != 0; }
  std::size_t index(const std::string& id) const;  // throws std::invalid_argument if unknown
  const std::vector<std::size_t>& parents(std::size_t node) const { return parents_[node]; }
  // Every node after all of its parents; deterministic for a given input.
  const std::vector<std::size_t>& topological() const { return topological_; }

  // marks[n] == 1 for every ancestor-or-self n of a node in `from`.
  std::vector<char> ancestors(const std::vector<std::size_t>& from) const;
  // For each node n with in_set[n]: the sum of value[m] over the ancestors-or-self m of n that
  // are in the set; 0 elsewhere. The set must hold every node on a path between two members
  // (candidate sets do). Merges cost a walk; chains cost O(1) per node, as in git.
  std::vector<double> ancestor_sums(const std::vector<char>& in_set,
                                    const std::vector<double>& value) const;

 private:
  std::vector<Commit> commits_;
  std::unordered_map<std::string, std::size_t> index_;
  std::vector<std::vector<std::size_t>> parents_;
  std::vector<std::size_t> topological_;
};

// git's bisection set: ancestors-or-self of every bad that are no ancestor-or-self of a good.
std::vector<char> candidate_marks(const CommitGraph& graph, const std::vector<std::size_t>& bads,
                                  const std::vector<std::size_t>& goods);

// How often one commit was judged each way (what `--json` reports as "verdicts").
struct CommitVerdicts {
  std::string commit;
  int good = 0;
  int bad = 0;
  int skip = 0;
};

enum class CommitBisectStatus {
  Searching,        // more commits to test
  Found,            // one candidate left: the first bad commit
  OnlySkippedLeft,  // git's "only 'skip'ped commits left": any of `possible` may be first bad
  Inconsistent,     // verdicts contradict a single culprit (possible only with stale k-way ones)
};

struct CommitBisectResult {
  CommitBisectStatus status = CommitBisectStatus::Searching;
  std::string culprit;                   // Found: the first bad commit
  std::vector<std::string> parents;      // Found: its parents, as given (boundary ones included)
  std::vector<std::string> possible;     // OnlySkippedLeft: the remaining candidates
  std::vector<std::string> skipped;      // commits judged Skip, in the order they were judged
  std::vector<CommitVerdicts> verdicts;  // per commit, in the order first judged
  int evaluations = 0;
};

// git bisect over the DAG. One slot: git's choice exactly (max min(X, N-X), git's tie order,
// git's skip_away() when the best commit is skipped). Several slots: commits whose X lies
// closest to N/(K+1), 2N/(K+1), ... so that the K verdicts cut the set into K+1 parts.
class CommitBisect {
 public:
  // Throws std::invalid_argument if bad is not listed or is an ancestor of a good. A good that
  // is not listed is taken as behind the history's boundary: it removes nothing.
  CommitBisect(std::vector<Commit> commits, std::vector<std::string> good, std::string bad);

  // Up to `slots` commits to test now; proposals not yet observed are not proposed twice.
  // Empty when done, or when everything worth testing is already out.
  std::vector<std::string> next(std::size_t slots);
  // Throws std::logic_error for a commit that is not an outstanding proposal.
  void observe(const std::string& commit, Observation observation);
  bool done() const { return status() != CommitBisectStatus::Searching; }
  CommitBisectResult result() const;
  int evaluations() const { return static_cast<int>(log_.size()); }
  // The commits the first bad one may still be, in input (rev-list) order.
  std::vector<std::string> candidates() const;

  static constexpr const char* kStateKind = "commit_bisect";  // to_json's "kind"
  nlohmann::json to_json() const;
  static CommitBisect from_json(const nlohmann::json& state);  // std::invalid_argument if bad

 private:
  CommitBisectStatus status() const;
  void apply(std::size_t node, Observation observation);
  void refresh();
  bool testable(std::size_t node) const;
  std::size_t git_rev_list_choice() const;
  std::vector<std::size_t> choose_one() const;
  std::vector<std::size_t> choose_spread(std::size_t count) const;

  CommitGraph graph_;
  std::vector<std::string> initial_good_;
  std::string initial_bad_;
  std::vector<std::size_t> goods_, bads_;
  std::vector<char> skipped_, known_bad_;
  std::vector<std::pair<std::string, Observation>> log_;
  std::vector<std::size_t> pending_;  // proposed, not yet observed
  std::vector<std::size_t> reissue_;  // pending ones restored from JSON, to be handed out again
  // Derived after every observation.
  std::vector<char> in_set_;
  std::vector<std::size_t> list_;  // candidates in git's order: reverse of the input order
  std::vector<double> reach_;      // X: candidates reachable from each candidate, itself included
};

// Shared by the commit searches; not part of their interface.
namespace commit_detail {
std::vector<CommitVerdicts> count_verdicts(
    const std::vector<std::pair<std::string, Observation>>& log);
nlohmann::json commits_to_json(const std::vector<Commit>& commits);
std::vector<Commit> commits_from_json(const nlohmann::json& json);
nlohmann::json log_to_json(const std::vector<std::pair<std::string, Observation>>& log);
std::vector<std::pair<std::string, Observation>> log_from_json(const nlohmann::json& json);
}  // namespace commit_detail

}  // namespace faultline::bisect
