// Tests for FlakyBisect and MajorityBisect: noise-free behaviour, accuracy on flaky
// predicates with fixed seeds (linear and merge-heavy), "no culprit", skips, budget, batches,
// option checks and JSON resume.
#include "bisect/flaky_bisect.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>

#include "commit_fixtures.hpp"

namespace faultline::bisect {
namespace {

using testing::Ancestry;
using testing::cid;
using testing::linear;

// Verdicts of a flaky test: contains(commit) says whether the regression is in it.
template <class Contains>
struct Noisy {
  Contains contains;
  double p_bad_looks_good, p_good_looks_bad;
  std::mt19937_64 rng;
  Observation operator()(const std::string& commit) {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    if (contains(commit)) return u < p_bad_looks_good ? Observation::Good : Observation::Bad;
    return u < p_good_looks_bad ? Observation::Bad : Observation::Good;
  }
};

template <class Search, class Judge>
void drive(Search& search, Judge& judge, std::vector<std::string>* tested = nullptr) {
  while (!search.done()) {
    const std::vector<std::string> proposal = search.next(1);
    if (proposal.empty()) break;
    if (tested) tested->push_back(proposal.front());
    search.observe(proposal.front(), judge(proposal.front()));
  }
}

auto at_or_after(int culprit) {
  return
      [culprit](const std::string& c) { return culprit > 0 && std::stoi(c.substr(1)) >= culprit; };
}

TEST(FlakyBisect, WithoutNoiseItIsABinarySearch) {
  const FlakyOptions exact{0.0, 0.0, 0.1, 0.99, 100};
  for (int culprit = 1; culprit <= 64; ++culprit) {
    FlakyBisect search(linear(64), {"c0"}, "c64", exact);
    Noisy<decltype(at_or_after(0))> judge{at_or_after(culprit), 0, 0, std::mt19937_64(1)};
    drive(search, judge);
    const FlakyBisectResult result = search.result();
    ASSERT_EQ(result.stop, FlakyStop::Confident);
    ASSERT_EQ(result.answer, FlakyAnswer::Culprit);
    EXPECT_EQ(result.culprit, cid(culprit));
    EXPECT_EQ(result.parents, std::vector<std::string>{cid(culprit - 1)});
    EXPECT_LE(result.executions, 7) << culprit;  // log2(64) = 6, plus telling "none" apart
    EXPECT_GE(result.confidence, 0.99);
  }
}

// N = 100, a bad commit passes 10 % of its runs, a clean one fails 2.5 %; one seed in ten
// has no culprit at all.
TEST(FlakyBisect, FindsFlakyCulpritsOnLinearHistories) {
  const FlakyOptions options{0.1, 0.025, 0.1, 0.99, 100};
  int correct = 0, executions = 0, reran = 0;
  const int seeds = 200;
  for (int seed = 0; seed < seeds; ++seed) {
    std::mt19937_64 rng(seed);
    const int culprit = seed % 10 == 0 ? 0 : 1 + static_cast<int>(rng() % 100);
    FlakyBisect search(linear(100), {"c0"}, "c100", options);
    Noisy<decltype(at_or_after(0))> judge{at_or_after(culprit), 0.1, 0.025, std::mt19937_64(rng())};
    drive(search, judge);
    const FlakyBisectResult r = search.result();
    correct += culprit == 0 ? r.answer == FlakyAnswer::NoCulprit
                            : r.answer == FlakyAnswer::Culprit && r.culprit == cid(culprit);
    executions += r.executions;
    for (const CommitVerdicts& v : r.verdicts) reran += v.good + v.bad + v.skip > 1;
  }
  EXPECT_GE(correct, 0.97 * seeds);
  EXPECT_LE(executions, 13 * seeds);
  EXPECT_GT(reran, 0);  // reruns happen when they are the most informative run
}

TEST(FlakyBisect, FindsFlakyCulpritsOnMergeHeavyDags) {
  const FlakyOptions options{0.1, 0.025, 0.1, 0.99, 100};
  int correct = 0;
  const int seeds = 150;
  for (int seed = 1; seed <= seeds; ++seed) {
    const testing::Scenario s = testing::random_scenario(seed, 80);
    auto contains = [ancestry = Ancestry(s.commits), culprit = s.culprit](const std::string& c) {
      return ancestry.is_ancestor(culprit, c);
    };
    FlakyBisect search(s.commits, s.good, s.bad, options);
    Noisy<decltype(contains)> judge{contains, 0.1, 0.025, std::mt19937_64(seed)};
    drive(search, judge);
    const FlakyBisectResult r = search.result();
    correct += r.answer == FlakyAnswer::Culprit && r.culprit == s.culprit;
  }
  EXPECT_GE(correct, 0.96 * seeds);
}

TEST(FlakyBisect, AnswersNoCulpritWhenTheFailureWasAFlake) {
  const FlakyOptions options{0.1, 0.05, 0.2, 0.99, 100};
  int right = 0;
  for (int seed = 0; seed < 100; ++seed) {
    FlakyBisect search(linear(50), {"c0"}, "c50", options);
    Noisy<decltype(at_or_after(0))> judge{at_or_after(0), 0.1, 0.05, std::mt19937_64(seed)};
    drive(search, judge);
    right += search.result().answer == FlakyAnswer::NoCulprit;
    EXPECT_NEAR(
        search.posterior_no_culprit() +
            [&] {
              double sum = 0;
              for (int i = 1; i <= 50; ++i) sum += search.posterior(cid(i));
              return sum;
            }(),
        1.0, 1e-9);
  }
  EXPECT_GE(right, 95);
}

TEST(FlakyBisect, SkippedCommitsAreNotProposedAgain) {
  FlakyBisect search(linear(30), {"c0"}, "c30", {0.1, 0.025, 0.1, 0.99, 100});
  Noisy<decltype(at_or_after(0))> judge{at_or_after(11), 0.1, 0.025, std::mt19937_64(7)};
  std::vector<std::string> skipped;
  while (!search.done()) {
    const std::string commit = search.next(1).at(0);
    ASSERT_EQ(std::count(skipped.begin(), skipped.end(), commit), 0) << commit;
    const int at = std::stoi(commit.substr(1));
    const bool broken = at >= 14 && at <= 18;
    if (broken) skipped.push_back(commit);
    search.observe(commit, broken ? Observation::Skip : judge(commit));
  }
  EXPECT_EQ(search.result().culprit, "c11");
  EXPECT_EQ(search.result().skipped, skipped);
}

TEST(FlakyBisect, StopsAtTheBudgetAndHandsOutBatches) {
  FlakyBisect search(linear(100), {"c0"}, "c100", {0.3, 0.1, 0.1, 0.99, 5});
  const std::vector<std::string> batch = search.next(4);
  ASSERT_EQ(batch.size(), 4u);
  EXPECT_EQ(std::set<std::string>(batch.begin(), batch.end()).size(), 4u);
  const std::vector<std::string> last = search.next(4);
  ASSERT_EQ(last.size(), 1u);  // 5 in all
  EXPECT_EQ(std::count(batch.begin(), batch.end(), last[0]), 0);
  EXPECT_TRUE(search.next(4).empty());
  Noisy<decltype(at_or_after(0))> judge{at_or_after(40), 0.3, 0.1, std::mt19937_64(3)};
  for (const std::string& commit : batch) search.observe(commit, judge(commit));
  EXPECT_FALSE(search.done());
  search.observe(last[0], judge(last[0]));
  EXPECT_TRUE(search.done());
  EXPECT_EQ(search.result().stop, FlakyStop::BudgetSpent);
  EXPECT_EQ(search.result().executions, 5);
  EXPECT_LT(search.result().confidence, 0.99);
}

TEST(FlakyBisect, RejectsOptionsAndMisuse) {
  const auto make = [](FlakyOptions o) { FlakyBisect(linear(5), {"c0"}, "c5", o); };
  EXPECT_THROW(make({-0.1, 0.0, 0.1, 0.99, 10}), std::invalid_argument);
  EXPECT_THROW(make({0.6, 0.5, 0.1, 0.99, 10}), std::invalid_argument);
  EXPECT_THROW(make({0.1, 0.0, 1.0, 0.99, 10}), std::invalid_argument);
  EXPECT_THROW(make({0.1, 0.0, 0.1, 0.0, 10}), std::invalid_argument);
  EXPECT_THROW(make({0.1, 0.0, 0.1, 0.99, 0}), std::invalid_argument);
  EXPECT_THROW(FlakyBisect(linear(5), {"c5"}, "c2"), std::invalid_argument);
  FlakyBisect search(linear(5), {"c0"}, "c5");
  EXPECT_THROW(search.observe("c3", Observation::Bad), std::logic_error);
  EXPECT_THROW(FlakyBisect::from_json(MajorityBisect(linear(5), {"c0"}, "c5", 3).to_json()),
               std::invalid_argument);
}

// Killed after six runs with one more out: the restored search re-issues that run, then
// makes exactly the choices the uninterrupted one made, down to the last bit of confidence.
TEST(FlakyBisect, ResumesFromJsonWithoutRepeatingARun) {
  const FlakyOptions options{0.2, 0.05, 0.1, 0.99, 100};
  using Judge = Noisy<decltype(at_or_after(0))>;
  FlakyBisect whole(linear(200), {"c0"}, "c200", options);
  Judge judge_whole{at_or_after(123), 0.2, 0.05, std::mt19937_64(99)};
  std::vector<std::string> whole_tested;
  drive(whole, judge_whole, &whole_tested);

  FlakyBisect first(linear(200), {"c0"}, "c200", options);
  Judge judge{at_or_after(123), 0.2, 0.05, std::mt19937_64(99)};
  std::vector<std::string> tested;
  for (int i = 0; i < 6; ++i) {
    tested.push_back(first.next(1).at(0));
    first.observe(tested.back(), judge(tested.back()));
  }
  const std::string outstanding = first.next(1).at(0);
  FlakyBisect resumed = FlakyBisect::from_json(nlohmann::json::parse(first.to_json().dump()));
  EXPECT_EQ(resumed.evaluations(), 6);
  ASSERT_EQ(resumed.next(1), std::vector<std::string>{outstanding});
  tested.push_back(outstanding);
  resumed.observe(outstanding, judge(outstanding));
  drive(resumed, judge, &tested);
  EXPECT_EQ(tested, whole_tested);
  EXPECT_EQ(resumed.result().culprit, whole.result().culprit);
  EXPECT_EQ(resumed.result().confidence, whole.result().confidence);
  EXPECT_EQ(resumed.result().executions, whole.result().executions);
}

TEST(MajorityBisect, RerunsEveryProbeAndVotes) {
  MajorityBisect search(linear(16), {"c0"}, "c16", 3);
  Noisy<decltype(at_or_after(0))> judge{at_or_after(9), 0, 0, std::mt19937_64(1)};
  drive(search, judge);
  const CommitBisectResult result = search.result();
  EXPECT_EQ(result.culprit, "c9");
  EXPECT_EQ(result.evaluations, 3 * 4);  // 4 probes for 16 candidates
  for (const CommitVerdicts& v : result.verdicts) EXPECT_EQ(v.good + v.bad, 3);
  EXPECT_THROW(search.observe("c9", Observation::Bad), std::logic_error);
  EXPECT_THROW(MajorityBisect(linear(4), {"c0"}, "c4", 0), std::invalid_argument);
}

TEST(MajorityBisect, ResumesMidProbe) {
  MajorityBisect search(linear(16), {"c0"}, "c16", 3);
  const std::vector<std::string> runs = search.next(2);
  ASSERT_EQ(runs, (std::vector<std::string>{"c8", "c8"}));
  search.observe("c8", Observation::Good);
  MajorityBisect resumed = MajorityBisect::from_json(search.to_json());
  EXPECT_EQ(resumed.next(5), (std::vector<std::string>{"c8", "c8"}));  // the one out, one new
  resumed.observe("c8", Observation::Bad);
  resumed.observe("c8", Observation::Good);  // 2 good of 3: c8 is good
  Noisy<decltype(at_or_after(0))> judge{at_or_after(12), 0, 0, std::mt19937_64(1)};
  drive(resumed, judge);
  EXPECT_EQ(resumed.result().culprit, "c12");
  EXPECT_EQ(resumed.evaluations(), 12);
}

}  // namespace
}  // namespace faultline::bisect
