// Tests for CommitBisect as a search: merge-heavy DAGs under a monotone predicate, k-way
// proposals, skips (git's skip_away(), clusters of skips), contradictions and JSON resume.
#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <set>
#include <stdexcept>

#include "bisect/commit_graph.hpp"
#include "commit_fixtures.hpp"

namespace faultline::bisect {
namespace {

using testing::Ancestry;
using testing::cid;
using testing::linear;
using testing::random_scenario;
using testing::Scenario;
using Predicate = std::function<Observation(const std::string&)>;

Predicate monotone(const Scenario& s) {
  return [ancestry = Ancestry(s.commits), culprit = s.culprit](const std::string& commit) {
    return ancestry.is_ancestor(culprit, commit) ? Observation::Bad : Observation::Good;
  };
}

// Keeps `slots` proposals out and answers the oldest first, like a pool of CI workers.
CommitBisectResult run(CommitBisect& search, const Predicate& judge, std::size_t slots,
                       std::vector<std::string>* tested = nullptr) {
  std::deque<std::string> out;
  while (!search.done()) {
    for (const std::string& commit : search.next(slots - out.size())) out.push_back(commit);
    if (out.empty()) break;
    const std::string commit = out.front();
    out.pop_front();
    if (tested) tested->push_back(commit);
    search.observe(commit, judge(commit));
  }
  return search.result();
}

TEST(CommitBisectDag, RandomMergeHeavyDagsFindTheCulprit) {
  for (const int n : {20, 60, 150}) {
    for (unsigned seed = 1; seed <= 100; ++seed) {
      const Scenario s = random_scenario(seed, n);
      for (const std::size_t slots : {1u, 3u}) {
        CommitBisect search(s.commits, s.good, s.bad);
        const std::size_t candidates = search.candidates().size();
        const CommitBisectResult result = run(search, monotone(s), slots);
        ASSERT_EQ(result.status, CommitBisectStatus::Found) << "seed " << seed << " n " << n;
        ASSERT_EQ(result.culprit, s.culprit) << "seed " << seed << " n " << n;
        ASSERT_LE(static_cast<std::size_t>(result.evaluations), candidates);
      }
    }
  }
}

TEST(CommitBisectKWay, ThreeSlotsCutTheSetIntoFourParts) {
  for (const int culprit : {1, 250, 777, 1000}) {
    CommitBisect search(linear(1000), {"c0"}, "c1000");
    int rounds = 0;
    while (!search.done()) {
      const std::vector<std::string> batch = search.next(3);
      ASSERT_FALSE(batch.empty());
      ++rounds;
      for (const std::string& commit : batch) {
        const bool bad = std::stoi(commit.substr(1)) >= culprit;
        search.observe(commit, bad ? Observation::Bad : Observation::Good);
      }
    }
    EXPECT_EQ(search.result().culprit, cid(culprit));
    EXPECT_LE(rounds, 6);  // log4(1000) ~ 5, against 10 rounds one at a time
  }
}

// git's arithmetic, by hand: N = 10, c5 skipped; the untried ranked by (min(X, N-X), id) are
// c4 c6 c3 c7 c2 c8 c1 c9 c10, get_prn(9) = 20472, index = (9*20472/32768) * 143 / 181 = 3.
TEST(CommitBisectSkip, SkipAwayPicksWhatGitPicks) {
  CommitBisect search(linear(10), {"c0"}, "c10");
  ASSERT_EQ(search.next(1), std::vector<std::string>{"c5"});
  search.observe("c5", Observation::Skip);
  EXPECT_EQ(search.next(1), std::vector<std::string>{"c7"});
}

TEST(CommitBisectSkip, AClusterOfSkipsDoesNotTrapTheSearch) {
  auto judge_for = [](int culprit) {
    return [culprit](const std::string& commit) {
      const int at = std::stoi(commit.substr(1));
      if (at >= 40 && at <= 60) return Observation::Skip;  // the build is broken there
      return at >= culprit ? Observation::Bad : Observation::Good;
    };
  };
  for (int culprit = 1; culprit <= 100; ++culprit) {
    CommitBisect search(linear(100), {"c0"}, "c100");
    const CommitBisectResult result = run(search, judge_for(culprit), 1);
    // Each broken commit is tried at most once, and the jumps away from them cost at most
    // twice the evaluations of a clean bisection (git's behaviour: it is not trapped).
    EXPECT_LE(result.skipped.size(), 21u);
    EXPECT_LE(result.evaluations - static_cast<int>(result.skipped.size()), 14) << culprit;
    if (culprit < 40 || culprit > 61) {
      EXPECT_EQ(result.status, CommitBisectStatus::Found) << culprit;
      EXPECT_EQ(result.culprit, cid(culprit));
      continue;
    }
    // c40..c60 untestable: with c39 good and c61 bad the first bad is any of c40..c61.
    ASSERT_EQ(result.status, CommitBisectStatus::OnlySkippedLeft) << culprit;
    const std::set<std::string> possible(result.possible.begin(), result.possible.end());
    EXPECT_TRUE(possible.count(cid(culprit)));
    EXPECT_EQ(possible.size(), 22u);
    for (const std::string& id : result.skipped) EXPECT_TRUE(possible.count(id)) << id;
  }
}

TEST(CommitBisectSkip, RandomSkipsOnDagsNeverLoseTheCulprit) {
  for (unsigned seed = 1; seed <= 150; ++seed) {
    const Scenario s = random_scenario(seed, 80);
    std::mt19937 rng(seed);
    std::set<std::string> broken;
    for (int i = 1; i < 79; ++i) {
      if (std::uniform_real_distribution<double>(0, 1)(rng) < 0.2) broken.insert(cid(i));
    }
    const Predicate clean = monotone(s);
    CommitBisect search(s.commits, s.good, s.bad);
    const CommitBisectResult result = run(
        search,
        [&](const std::string& commit) {
          return broken.count(commit) ? Observation::Skip : clean(commit);
        },
        1);
    if (result.status == CommitBisectStatus::Found) {
      EXPECT_EQ(result.culprit, s.culprit) << seed;
    } else {
      ASSERT_EQ(result.status, CommitBisectStatus::OnlySkippedLeft) << seed;
      const std::set<std::string> possible(result.possible.begin(), result.possible.end());
      EXPECT_TRUE(possible.count(s.culprit)) << seed;
    }
  }
}

TEST(CommitBisectKWay, ContradictingStaleVerdictsAreReported) {
  CommitBisect search(linear(4), {"c0"}, "c4");
  ASSERT_EQ(search.next(2), (std::vector<std::string>{"c1", "c3"}));
  search.observe("c1", Observation::Bad);
  search.observe("c3", Observation::Good);  // a descendant of a bad commit: not monotone
  EXPECT_TRUE(search.done());
  EXPECT_EQ(search.result().status, CommitBisectStatus::Inconsistent);
  EXPECT_TRUE(search.next(1).empty());
}

TEST(CommitBisectJson, ResumesWithTheSameProposalsAndNoRepeats) {
  const Scenario s = random_scenario(42, 120);
  const Predicate judge = monotone(s);
  CommitBisect whole(s.commits, s.good, s.bad);
  std::vector<std::string> whole_tested;
  const CommitBisectResult expected = run(whole, judge, 1, &whole_tested);
  ASSERT_GE(whole_tested.size(), 4u);

  CommitBisect first(s.commits, s.good, s.bad);
  std::vector<std::string> tested;
  for (int i = 0; i < 3; ++i) {
    tested.push_back(first.next(1).at(0));
    first.observe(tested.back(), judge(tested.back()));
  }
  const std::string outstanding = first.next(1).at(0);  // killed while this one ran
  CommitBisect resumed = CommitBisect::from_json(nlohmann::json::parse(first.to_json().dump()));
  EXPECT_EQ(resumed.evaluations(), 3);
  EXPECT_EQ(resumed.next(1), std::vector<std::string>{outstanding});
  tested.push_back(outstanding);
  resumed.observe(outstanding, judge(outstanding));
  const CommitBisectResult result = run(resumed, judge, 1, &tested);
  EXPECT_EQ(tested, whole_tested);
  EXPECT_EQ(result.culprit, expected.culprit);
  EXPECT_EQ(result.evaluations, expected.evaluations);
}

TEST(CommitBisectJson, ResumesABatchMidway) {
  auto judge = [](const std::string& c) {
    return std::stoi(c.substr(1)) >= 61 ? Observation::Bad : Observation::Good;
  };
  CommitBisect search(linear(100), {"c0"}, "c100");
  const std::vector<std::string> batch = search.next(3);
  ASSERT_EQ(batch.size(), 3u);
  search.observe(batch[0], judge(batch[0]));
  CommitBisect resumed = CommitBisect::from_json(search.to_json());
  const std::vector<std::string> again = resumed.next(3);
  ASSERT_EQ(again.size(), 3u);
  EXPECT_EQ(again[0], batch[1]);
  EXPECT_EQ(again[1], batch[2]);
  std::vector<std::string> tested = {batch[0]};
  for (const std::string& c : again) tested.push_back(c), resumed.observe(c, judge(c));
  const CommitBisectResult result = run(resumed, judge, 3, &tested);
  EXPECT_EQ(result.culprit, "c61");
  EXPECT_EQ(std::set<std::string>(tested.begin(), tested.end()).size(), tested.size());
  EXPECT_EQ(result.evaluations, static_cast<int>(tested.size()));
}

TEST(CommitBisectJson, RejectsBrokenStates) {
  CommitBisect search(linear(5), {"c0"}, "c5");
  nlohmann::json state = search.to_json();
  EXPECT_THROW(CommitBisect::from_json(nlohmann::json::object()), std::invalid_argument);
  state["kind"] = "ddmin";
  EXPECT_THROW(CommitBisect::from_json(state), std::invalid_argument);
  state = search.to_json();
  state["observations"] = {{{"commit", "c9"}, {"verdict", "good"}}};
  EXPECT_THROW(CommitBisect::from_json(state), std::invalid_argument);
  state["observations"] = {{{"commit", "c2"}, {"verdict", "maybe"}}};
  EXPECT_THROW(CommitBisect::from_json(state), std::invalid_argument);
}

}  // namespace
}  // namespace faultline::bisect
