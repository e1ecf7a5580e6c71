// Test support for the commit searches: synthetic histories (linear, merge-heavy random DAGs)
// and an independent ancestor oracle for the "bad iff the culprit is an ancestor" predicate.
#pragma once

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "bisect/commit_graph.hpp"

namespace faultline::testing {

using bisect::Commit;

inline std::string cid(int i) {
  return "c" + std::to_string(i);
}

// c0 <- c1 <- ... <- cN, newest first like `git rev-list --parents`.
inline std::vector<Commit> linear(int n) {
  std::vector<Commit> commits;
  for (int i = n; i >= 0; --i)
    commits.push_back({cid(i), i == 0 ? std::vector<std::string>{} : std::vector{cid(i - 1)}});
  return commits;
}

// c0 .. c{n-1} in creation order (each parent older), listed newest first. About 40 % of the
// commits are merges of 2 or 3 recent commits; a few are extra roots.
inline std::vector<Commit> random_dag(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<Commit> commits;
  for (int i = 0; i < n; ++i) {
    Commit commit{cid(i), {}};
    const int lo = std::max(0, i - 12);
    const double roll = std::uniform_real_distribution<double>(0, 1)(rng);
    const int wanted = i == 0 || roll < 0.03 ? 0 : roll < 0.6 ? 1 : roll < 0.9 ? 2 : 3;
    std::set<int> chosen;
    if (wanted > 0) chosen.insert(i - 1);
    while (static_cast<int>(chosen.size()) < std::min(wanted, i))
      chosen.insert(std::uniform_int_distribution<int>(lo, i - 1)(rng));
    for (int p : chosen) commit.parents.push_back(cid(p));
    commits.push_back(commit);
  }
  std::reverse(commits.begin(), commits.end());
  return commits;
}

// Ancestor-or-self sets by plain search, independent of CommitGraph.
class Ancestry {
 public:
  explicit Ancestry(const std::vector<Commit>& commits) {
    for (const Commit& c : commits) parents_[c.id] = c.parents;
  }
  std::set<std::string> of(const std::vector<std::string>& from) const {
    std::set<std::string> seen;
    std::vector<std::string> stack(from.begin(), from.end());
    while (!stack.empty()) {
      const std::string id = stack.back();
      stack.pop_back();
      if (!parents_.count(id) || !seen.insert(id).second) continue;
      for (const std::string& p : parents_.at(id)) stack.push_back(p);
    }
    return seen;
  }
  bool is_ancestor(const std::string& ancestor, const std::string& of_commit) const {
    return of({of_commit}).count(ancestor) != 0;
  }
  // git's set: ancestors of bad minus ancestors of the goods.
  std::set<std::string> candidates(const std::vector<std::string>& good,
                                   const std::string& bad) const {
    std::set<std::string> out = of({bad});
    for (const std::string& id : of(good)) out.erase(id);
    return out;
  }

 private:
  std::unordered_map<std::string, std::vector<std::string>> parents_;
};

// A bisection problem with a known answer.
struct Scenario {
  std::vector<Commit> commits;
  std::vector<std::string> good;
  std::string bad;
  std::string culprit;
};

// A random DAG, bad = its newest commit, a random culprit among git's candidates, and up to
// two extra good commits that do not contain the culprit.
inline Scenario random_scenario(unsigned seed, int n) {
  Scenario s{random_dag(n, seed), {"c0"}, cid(n - 1), ""};
  const Ancestry ancestry(s.commits);
  std::mt19937 rng(seed * 7919u + 1);
  const auto candidates = ancestry.candidates(s.good, s.bad);
  const std::vector<std::string> pool(candidates.begin(), candidates.end());
  s.culprit = pool[std::uniform_int_distribution<std::size_t>(0, pool.size() - 1)(rng)];
  for (int extra = 0; extra < 2; ++extra) {
    const std::string g = cid(std::uniform_int_distribution<int>(1, n - 2)(rng));
    if (!ancestry.is_ancestor(s.culprit, g)) s.good.push_back(g);
  }
  return s;
}

}  // namespace faultline::testing
