// Tests for gpu/nccl/bandwidth.cpp: nccl-tests' bandwidth arithmetic, the expected allreduce sum
// and the rule that names a slow rank or link.
#include "gpu/nccl/bandwidth.hpp"

#include <gtest/gtest.h>

namespace faultline::gpu {
namespace {

TEST(Bandwidth, BusBandwidthIsNcclTestsAllreduceFactor) {
  EXPECT_DOUBLE_EQ(algbw_gbps(1000000000, 0.5), 2.0);
  EXPECT_DOUBLE_EQ(algbw_gbps(100, 0), 0);
  EXPECT_DOUBLE_EQ(allreduce_busbw_gbps(10, 2), 10);    // 2(n-1)/n = 1
  EXPECT_DOUBLE_EQ(allreduce_busbw_gbps(10, 8), 17.5);  // 2*7/8
  EXPECT_DOUBLE_EQ(allreduce_busbw_gbps(10, 1), 0);     // nothing crosses a link
}

TEST(Bandwidth, ExpectedSumAndMismatch) {
  EXPECT_EQ(allreduce_fill(0), 1.0f);
  EXPECT_EQ(allreduce_expected(1), 1.0f);
  EXPECT_EQ(allreduce_expected(8), 36.0f);
  EXPECT_EQ(first_mismatch({36, 36, 36}, 36), -1);
  EXPECT_EQ(first_mismatch({36, 35, 36}, 36), 1);
}

std::vector<LinkBandwidth> ring(std::vector<double> gbps) {
  std::vector<LinkBandwidth> links;
  const int n = static_cast<int>(gbps.size());
  for (int a = 0; a < n; ++a) links.push_back({a, (a + 1) % n, gbps[static_cast<size_t>(a)]});
  return links;
}

TEST(Bandwidth, EvenLinksNameNothing) {
  const auto links = ring({100, 98, 101, 99});
  const auto verdict = judge_links(links);
  EXPECT_TRUE(verdict.ranks.empty());
  EXPECT_TRUE(verdict.links.empty());
  EXPECT_EQ(describe(verdict, links), "no rank or link below the others (median 99.5 GB/s)");
}

TEST(Bandwidth, ARankWithEveryLinkSlowIsNamed) {
  // Rank 2's links are 1-2 and 2-3.
  const auto links = ring({100, 20, 22, 101});
  const auto verdict = judge_links(links);
  ASSERT_EQ(verdict.ranks, std::vector<int>{2});
  EXPECT_TRUE(verdict.links.empty());
  EXPECT_EQ(describe(verdict, links),
            "rank 2 (links 1-2 20.0 GB/s, 2-3 22.0 GB/s) (median 61.0 GB/s)");
}

TEST(Bandwidth, OneSlowLinkIsNamedAsALink) {
  const auto links = ring({100, 100, 30, 100});
  const auto verdict = judge_links(links);
  EXPECT_TRUE(verdict.ranks.empty());
  ASSERT_EQ(verdict.links.size(), 1u);
  EXPECT_EQ(verdict.links[0].a, 2);
  EXPECT_EQ(verdict.links[0].b, 3);
}

TEST(Bandwidth, TwoRanksHaveOneLinkAndNoOutlier) {
  const auto verdict = judge_links({{0, 1, 50}});
  EXPECT_TRUE(verdict.ranks.empty());
  EXPECT_TRUE(verdict.links.empty());
}

}  // namespace
}  // namespace faultline::gpu
