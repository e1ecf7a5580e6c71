// Tests for src/trainer/sampler.cpp: seeded per-epoch permutations, rank slices, epochs.
#include "trainer/sampler.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace faultline::trainer {
namespace {

// The indices of steps 1..steps, concatenated.
std::vector<uint64_t> stream(const BatchSampler& sampler, int64_t steps) {
  std::vector<uint64_t> all;
  for (int64_t step = 1; step <= steps; ++step) {
    auto batch = sampler.global_batch(step);
    all.insert(all.end(), batch.begin(), batch.end());
  }
  return all;
}

// True when positions [begin, begin + n) of `all` hold every index of [0, n) exactly once.
::testing::AssertionResult is_permutation(const std::vector<uint64_t>& all, size_t begin,
                                          uint64_t n) {
  std::vector<int> seen(n, 0);
  for (size_t i = begin; i < begin + n; ++i) {
    if (all[i] >= n) return ::testing::AssertionFailure() << "index " << all[i] << " >= " << n;
    if (++seen[all[i]] > 1) return ::testing::AssertionFailure() << "index " << all[i] << " twice";
  }
  return ::testing::AssertionSuccess();
}

TEST(BatchSampler, BatchHasTheRequestedSize) {
  BatchSampler sampler(1, 1000, 10);
  EXPECT_EQ(sampler.global_batch(1).size(), 10u);
  EXPECT_EQ(sampler.global_batch(12345).size(), 10u);
  EXPECT_EQ(sampler.num_samples(), 1000u);
}

TEST(BatchSampler, GlobalBatchIsAPureFunctionOfSeedAndStep) {
  BatchSampler a(42, 1000, 16), b(42, 1000, 16);
  std::vector<std::vector<uint64_t>> forward;
  for (int64_t step = 1; step <= 200; ++step) forward.push_back(a.global_batch(step));
  for (int64_t step = 200; step >= 1; --step) EXPECT_EQ(b.global_batch(step), forward[step - 1]);
  EXPECT_EQ(a.global_batch(77), a.global_batch(77));
  EXPECT_EQ(BatchSampler(42, 1000, 16).global_batch(9000), b.global_batch(9000));
}

TEST(BatchSampler, OneEpochIsAPermutation) {
  BatchSampler sampler(7, 1000, 10);  // N not a power of two: cycle walking
  auto all = stream(sampler, 100);
  ASSERT_EQ(all.size(), 1000u);
  EXPECT_TRUE(is_permutation(all, 0, 1000));
}

TEST(BatchSampler, EveryEpochIsAPermutationForManySizes) {
  for (uint64_t n : {1ull, 2ull, 3ull, 5ull, 37ull, 64ull, 100ull, 1000ull, 1024ull, 4097ull}) {
    SCOPED_TRACE(n);
    BatchSampler sampler(99, n, 1);
    auto all = stream(sampler, static_cast<int64_t>(3 * n));
    for (int epoch = 0; epoch < 3; ++epoch) EXPECT_TRUE(is_permutation(all, epoch * n, n));
  }
}

TEST(BatchSampler, BatchesThatStraddleEpochsStillCoverEachOnce) {
  BatchSampler sampler(3, 10, 4);  // 10 samples, batches of 4: step 3 spans two epochs
  auto all = stream(sampler, 10);  // 40 indices: 4 full epochs
  for (int epoch = 0; epoch < 4; ++epoch) EXPECT_TRUE(is_permutation(all, epoch * 10, 10));
}

TEST(BatchSampler, SingleSampleCorpus) {
  BatchSampler sampler(5, 1, 3);
  for (int64_t step = 1; step <= 5; ++step)
    EXPECT_EQ(sampler.global_batch(step), (std::vector<uint64_t>{0, 0, 0}));
  EXPECT_EQ(sampler.epoch_of(1), 0u);
  EXPECT_EQ(sampler.epoch_of(2), 3u);
}

TEST(BatchSampler, SeedsAndEpochsGiveDifferentOrders) {
  BatchSampler a(1, 1000, 1000), b(2, 1000, 1000);
  EXPECT_NE(a.global_batch(1), b.global_batch(1));
  EXPECT_NE(a.global_batch(1), a.global_batch(2));  // epoch 0 vs epoch 1
  EXPECT_NE(a.global_batch(2), a.global_batch(3));
  std::vector<uint64_t> identity(1000);
  for (uint64_t i = 0; i < 1000; ++i) identity[i] = i;
  EXPECT_NE(a.global_batch(1), identity);
  // Seeds differ already in the first few indices, not only as whole permutations.
  BatchSampler c(1, 1000, 8), d(2, 1000, 8);
  EXPECT_NE(c.global_batch(1), d.global_batch(1));
}

TEST(BatchSampler, RankSlicesPartitionTheBatchForAnyWorldSize) {
  BatchSampler sampler(11, 1000, 16);
  for (int64_t step : {1, 2, 63, 64, 500}) {
    const auto batch = sampler.global_batch(step);
    for (int world : {1, 2, 4, 8, 16}) {
      SCOPED_TRACE(::testing::Message() << "step " << step << " world " << world);
      std::vector<uint64_t> joined;
      for (int rank = 0; rank < world; ++rank) {
        auto slice = BatchSampler::rank_slice(batch, rank, world);
        EXPECT_EQ(slice.size(), batch.size() / world);
        joined.insert(joined.end(), slice.begin(), slice.end());
      }
      EXPECT_EQ(joined, batch);
    }
  }
}

TEST(BatchSampler, RankSliceIsAContiguousBlock) {
  const std::vector<uint64_t> batch = {10, 11, 12, 13, 14, 15};
  EXPECT_EQ(BatchSampler::rank_slice(batch, 0, 3), (std::vector<uint64_t>{10, 11}));
  EXPECT_EQ(BatchSampler::rank_slice(batch, 1, 3), (std::vector<uint64_t>{12, 13}));
  EXPECT_EQ(BatchSampler::rank_slice(batch, 2, 3), (std::vector<uint64_t>{14, 15}));
  EXPECT_EQ(BatchSampler::rank_slice(batch, 0, 1), batch);
}

TEST(BatchSampler, EpochOf) {
  BatchSampler exact(1, 100, 10);
  EXPECT_EQ(exact.epoch_of(1), 0u);
  EXPECT_EQ(exact.epoch_of(10), 0u);
  EXPECT_EQ(exact.epoch_of(11), 1u);
  EXPECT_EQ(exact.epoch_of(20), 1u);
  EXPECT_EQ(exact.epoch_of(21), 2u);
  BatchSampler straddling(1, 10, 4);  // step k starts at position 4(k-1)
  EXPECT_EQ(straddling.epoch_of(3), 0u);
  EXPECT_EQ(straddling.epoch_of(4), 1u);
  EXPECT_EQ(straddling.epoch_of(6), 2u);
}

TEST(BatchSampler, EpochBoundaryMatchesThePermutationChange) {
  // The first batch of epoch 1 is the start of a fresh permutation, not a continuation.
  BatchSampler sampler(8, 50, 50);
  auto epoch0 = sampler.global_batch(1), epoch1 = sampler.global_batch(2);
  EXPECT_EQ(sampler.epoch_of(2), 1u);
  BatchSampler other(8, 50, 25);  // the same stream, cut into halves
  auto half_a = other.global_batch(3), half_b = other.global_batch(4);
  half_a.insert(half_a.end(), half_b.begin(), half_b.end());
  EXPECT_EQ(half_a, epoch1);
  EXPECT_NE(epoch0, epoch1);
}

}  // namespace
}  // namespace faultline::trainer
