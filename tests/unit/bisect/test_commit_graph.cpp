// Tests for CommitGraph and CommitBisect's choices: input checks, git's own rev-list --bisect
// cases (t/t6002-rev-list-bisect.sh) and evaluation counts on linear histories.
#include "bisect/commit_graph.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "commit_fixtures.hpp"

namespace faultline::bisect {
namespace {

using testing::Ancestry;
using testing::cid;
using testing::linear;

TEST(CommitGraph, OrdersParentsFirstAndDropsBoundaryParents) {
  const CommitGraph graph({{"m", {"a", "b"}}, {"b", {"r"}}, {"a", {"r", "outside"}}, {"r", {}}});
  std::vector<std::size_t> seen_at(graph.size());
  for (std::size_t i = 0; i < graph.topological().size(); ++i) seen_at[graph.topological()[i]] = i;
  for (std::size_t node = 0; node < graph.size(); ++node) {
    for (const std::size_t parent : graph.parents(node)) EXPECT_LT(seen_at[parent], seen_at[node]);
  }
  EXPECT_EQ(graph.parents(graph.index("a")).size(), 1u);  // "outside" is the boundary
  const std::vector<char> all(graph.size(), 1);
  const std::vector<double> sums = graph.ancestor_sums(all, std::vector<double>(graph.size(), 1));
  EXPECT_EQ(sums[graph.index("m")], 4);  // r counted once through both branches
  EXPECT_EQ(sums[graph.index("a")], 2);
}

TEST(CommitGraph, RejectsBadInput) {
  EXPECT_THROW(CommitGraph(std::vector<Commit>{}), std::invalid_argument);
  EXPECT_THROW(CommitGraph({{"a", {}}, {"a", {}}}), std::invalid_argument);
  EXPECT_THROW(CommitGraph(std::vector<Commit>{{"", {}}}), std::invalid_argument);
  EXPECT_THROW(CommitGraph({{"a", {"b"}}, {"b", {"a"}}}), std::invalid_argument);
  EXPECT_THROW(CommitGraph(std::vector<Commit>{{"a", {"a"}}}), std::invalid_argument);
  EXPECT_THROW(CommitBisect(linear(3), {"c0"}, "nope"), std::invalid_argument);
  EXPECT_THROW(CommitBisect(linear(3), {"c2"}, "c1"), std::invalid_argument);  // bad below good
  EXPECT_THROW(CommitBisect(linear(3), {"c3"}, "c3"), std::invalid_argument);
}

// The history t6002 builds, one commit per line with its parents, in creation order (git
// lists it newest first, so we reverse it).
std::vector<Commit> t6002_history() {
  std::istringstream lines(R"(root
    l0 root
    l1 l0
    l2 l1
    a0 l2
    a1 a0
    b1 a0
    c1 b1
    b2 b1
    b3 b2
    c2 c1 b2
    c3 c2
    a2 a1
    a3 a2
    b4 b3 a3
    a4 a3 b4 c3
    l3 a4
    l4 l3
    l5 l4
    F
    e8 F
    e7 e8
    e6 e7
    e5 e6
    f4 F
    f3 f4
    f2 f3
    f1 f2
    e4 e5
    e3 e4
    e2 e3
    e1 e2
    E e1 f1
    U
    u0 U
    u1 u0
    u2 u0
    u3 u0
    u4 u0
    u5 u0
    V u1 u2 u3 u4 u5)");
  std::vector<Commit> made;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    Commit commit;
    words >> commit.id;
    for (std::string parent; words >> parent;) commit.parents.push_back(parent);
    made.push_back(commit);
  }
  return {made.rbegin(), made.rend()};
}

// What `git rev-list --bisect bad ^good...` prints: the proposal, or bad itself when it is
// the only candidate left.
std::string rev_list_bisect(const std::vector<std::string>& good, const std::string& bad) {
  CommitBisect search(t6002_history(), good, bad);
  if (search.done()) return search.result().culprit;
  const std::vector<std::string> proposal = search.next(1);
  return proposal.empty() ? "" : proposal.front();
}

// t6002's test_output_expect_success cases: the exact commit git must print.
TEST(CommitBisectGit, T6002ExactChoices) {
  struct Case {
    std::string bad;
    std::vector<std::string> good;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"l5", {"root"}, "c3"},
      {"l5", {"root", "c3"}, "b4"},
      {"l5", {"c3", "b4"}, "l3"},
      {"l3", {"root", "c3", "b4"}, "a4"},
      {"l3", {"b3", "a3", "a4"}, "l3"},
      {"l4", {"a2", "a3", "a4"}, "l3"},
      {"l3", {"a2", "a3", "a4"}, "l3"},
      {"a4", {"a2", "a3", "b4"}, "c2"},
      {"a4", {"a2", "a3", "b4", "c2"}, "c3"},
      {"a4", {"a2", "a3", "b4", "c2", "c3"}, "a4"},
      {"c3", {"a2", "a3", "b4", "c2"}, "c3"},
      {"c3", {"b1", "c1"}, "c2"},  // "--bisect can default to good/bad refs"
  };
  for (const Case& c : cases) EXPECT_EQ(rev_list_bisect(c.good, c.bad), c.expected) << c.bad;
}

// t6002's test_bisection_diff cases: |N - 2X| / 2 (rounded down) within the stated tolerance,
// with N and X counted by an independent oracle.
TEST(CommitBisectGit, T6002BisectionDiff) {
  struct Case {
    int max_diff;
    std::string bad;
    std::vector<std::string> good;
  };
  std::vector<Case> cases;
  for (const char* head :
       {"l0", "l1", "l2", "a0", "a1", "a2", "a3", "b1", "b2", "b3", "c1", "c2", "c3"})
    cases.push_back({0, head, {"root"}});
  for (const char* head :
       {"E", "e1", "e2", "e3", "e4", "e5", "e6", "e7", "f1", "f2", "f3", "f4", "E"})
    cases.push_back({0, head, {"F"}});
  cases.push_back({1, "V", {"U"}});
  cases.push_back({0, "V", {"U", "u1", "u2", "u3"}});
  for (const char* head : {"u1", "u2", "u3", "u4", "u5"}) cases.push_back({0, head, {"U"}});

  const Ancestry ancestry(t6002_history());
  for (const Case& c : cases) {
    const std::string choice = rev_list_bisect(c.good, c.bad);
    const auto everything = ancestry.candidates(c.good, c.bad);
    const auto below = ancestry.candidates(c.good, choice);
    ASSERT_TRUE(everything.count(choice)) << c.bad;
    const int err =
        std::abs(static_cast<int>(everything.size()) - 2 * static_cast<int>(below.size())) / 2;
    EXPECT_LE(err, c.max_diff) << c.bad << " chose " << choice;
  }
}

// Every culprit position on linear histories of 1..200 candidates: found with at most
// ceil(log2 N) evaluations (the issue allows one more).
TEST(CommitBisectLinear, EveryCulpritWithinLogEvaluations) {
  for (int n = 1; n <= 200; ++n) {
    const int bound = static_cast<int>(std::ceil(std::log2(n)));
    for (int culprit = 1; culprit <= n; ++culprit) {
      CommitBisect search(linear(n), {"c0"}, cid(n));
      while (!search.done()) {
        const std::vector<std::string> proposal = search.next(1);
        ASSERT_EQ(proposal.size(), 1u);
        const int at = std::stoi(proposal[0].substr(1));
        search.observe(proposal[0], at >= culprit ? Observation::Bad : Observation::Good);
      }
      const CommitBisectResult result = search.result();
      ASSERT_EQ(result.status, CommitBisectStatus::Found);
      ASSERT_EQ(result.culprit, cid(culprit));
      ASSERT_EQ(result.parents, std::vector<std::string>{cid(culprit - 1)});
      ASSERT_LE(result.evaluations, bound) << "n " << n << " culprit " << culprit;
      ASSERT_EQ(result.verdicts.size(), static_cast<std::size_t>(result.evaluations));
    }
  }
}

// `git rev-list --parents --boundary c5 ^c1 ^c2` lists neither c1 nor c2: both are accepted.
TEST(CommitBisectLinear, GoodsBehindTheBoundaryRemoveNothing) {
  std::vector<Commit> listed = linear(5);
  listed.resize(3);  // c5 c4 c3, c3's parent c2 is the boundary
  CommitBisect search(listed, {"c1", "c2"}, "c5");
  EXPECT_EQ(search.candidates(), (std::vector<std::string>{"c5", "c4", "c3"}));
}

TEST(CommitBisectLinear, CandidatesShrinkAsGitsDo) {
  CommitBisect search(linear(10), {"c0"}, "c10");
  EXPECT_EQ(search.candidates().size(), 10u);
  ASSERT_EQ(search.next(1), std::vector<std::string>{"c5"});
  EXPECT_TRUE(search.next(0).empty());
  search.observe("c5", Observation::Good);
  EXPECT_EQ(search.candidates(), (std::vector<std::string>{"c10", "c9", "c8", "c7", "c6"}));
  EXPECT_THROW(search.observe("c5", Observation::Good), std::logic_error);
  EXPECT_THROW(search.observe("c7", Observation::Good), std::logic_error);  // not proposed
}

}  // namespace
}  // namespace faultline::bisect
