// Tests for bisect/drive.hpp: the one search loop drives a real search to its answer, hands the
// evaluator batches of at most `slots`, persists after each batch, and stops when nothing is left
// to propose.
#include <gtest/gtest.h>

#include <vector>

#include "bisect/drive.hpp"
#include "bisect/first_bad.hpp"

namespace faultline::bisect {
namespace {

TEST(Drive, FindsTheFirstBadCandidateWithBatchesOfAtMostTheSlots) {
  FirstBad search(64);
  int evaluations = 0, batches = 0, saved = 0;
  drive(
      search, 3,
      [&](const std::vector<size_t>& points) {
        EXPECT_LE(points.size(), 3u);
        ++batches;
        std::vector<Observation> observed;
        for (size_t point : points) {
          ++evaluations;
          observed.push_back(point >= 41 ? Observation::Bad : Observation::Good);
        }
        return observed;
      },
      [&] { ++saved; });
  ASSERT_TRUE(search.done());
  EXPECT_EQ(search.result().first_bad, 41u);
  EXPECT_EQ(saved, batches);
  EXPECT_LT(evaluations, 64);
}

// A search that proposes nothing though it is not done (everything left is untestable).
struct Stuck {
  bool done() const { return false; }
  std::vector<int> next(size_t) { return {}; }
  void observe(int, Observation) { ADD_FAILURE() << "nothing was proposed"; }
};

TEST(Drive, StopsWhenTheSearchHasNothingToPropose) {
  Stuck stuck;
  int calls = 0;
  drive(stuck, 2, [&](const std::vector<int>&) {
    ++calls;
    return std::vector<Observation>{};
  });
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace faultline::bisect
