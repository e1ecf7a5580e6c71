// Tests for gpu/timeline/activity_timeline.cpp on synthetic activity records: kernel names,
// unions of overlapping work, NCCL against compute, idle gaps and interval bucketing.
#include "gpu/timeline/activity_timeline.hpp"

#include <gtest/gtest.h>

namespace faultline::gpu {
namespace {

constexpr uint64_t kMs = 1000000;

Activity kernel(uint64_t start_ms, uint64_t end_ms, ActivityKind kind = ActivityKind::Compute,
                uint32_t device = 0) {
  return {kind, device, start_ms * kMs, end_ms * kMs};
}

TEST(ActivityTimeline, NcclKernelsAreRecognisedByName) {
  EXPECT_EQ(
      classify_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
      ActivityKind::Nccl);
  EXPECT_EQ(classify_kernel("_Z28ncclKernel_AllReduce_RING_LL_Sum_float14ncclWorkElem"),
            ActivityKind::Nccl);
  EXPECT_EQ(classify_kernel("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn"),
            ActivityKind::Compute);
  EXPECT_EQ(classify_kernel(""), ActivityKind::Compute);
}

TEST(ActivityTimeline, UnionCountsOverlapOnce) {
  EXPECT_EQ(union_length({{0, 10}, {5, 15}, {20, 30}, {22, 25}}), 25u);
  EXPECT_EQ(union_length({}), 0u);
  EXPECT_EQ(union_length({{10, 10}, {7, 3}}), 0u);  // empty and reversed segments count nothing
}

TEST(ActivityTimeline, SummarizeSplitsComputeNcclMemcpyAndIdle) {
  // 0-100 ms: compute 10-40 and 30-50 (overlapping streams), NCCL 45-70, memcpy 80-85.
  const auto f = summarize(0, 0, 100 * kMs,
                           {kernel(10, 40), kernel(30, 50), kernel(45, 70, ActivityKind::Nccl),
                            kernel(80, 85, ActivityKind::Memcpy)});
  EXPECT_DOUBLE_EQ(f.compute_ms, 40);
  EXPECT_DOUBLE_EQ(f.nccl_ms, 25);
  EXPECT_DOUBLE_EQ(f.overlap_ms, 5);
  EXPECT_DOUBLE_EQ(f.memcpy_ms, 5);
  EXPECT_DOUBLE_EQ(f.busy_ms, 65);  // 10-70 and 80-85
  EXPECT_DOUBLE_EQ(f.idle_ms, 35);
  EXPECT_DOUBLE_EQ(f.max_gap_ms, 15);  // 85-100, the edge included
  EXPECT_EQ(f.kernels, 3);
  EXPECT_EQ(f.nccl_kernels, 1);
  EXPECT_EQ(f.memcpys, 1);
}

TEST(ActivityTimeline, ActivitiesAreClippedToTheInterval) {
  // A kernel 50-250 ms seen from the interval 100-200 ms: busy all of it, started elsewhere.
  const auto f = summarize(0, 100 * kMs, 200 * kMs, {kernel(50, 250)});
  EXPECT_DOUBLE_EQ(f.busy_ms, 100);
  EXPECT_DOUBLE_EQ(f.idle_ms, 0);
  EXPECT_DOUBLE_EQ(f.max_gap_ms, 0);
  EXPECT_EQ(f.kernels, 0);
}

TEST(ActivityTimeline, TimelineWritesEachIntervalOnceIncludingIdleOnes) {
  Timeline timeline(100 * kMs);
  timeline.add(kernel(10, 20));
  timeline.add(kernel(350, 360));  // 100-300 ms: nothing ran (a data stall looks like this)
  timeline.add(kernel(150, 170, ActivityKind::Compute, 1));
  auto closed = timeline.take_closed(300 * kMs);
  // Device 0: intervals 0, 1, 2; device 1: interval 1, its first and last so far.
  ASSERT_EQ(closed.size(), 4u);
  EXPECT_EQ(closed[0].device, 0u);
  EXPECT_DOUBLE_EQ(closed[0].busy_ms, 10);
  EXPECT_DOUBLE_EQ(closed[1].busy_ms, 0);
  EXPECT_DOUBLE_EQ(closed[1].idle_ms, 100);
  EXPECT_DOUBLE_EQ(closed[2].idle_ms, 100);
  EXPECT_EQ(closed[3].device, 1u);
  EXPECT_DOUBLE_EQ(closed[3].busy_ms, 20);
  EXPECT_EQ(closed[3].start_ns, 100 * kMs);
  EXPECT_TRUE(timeline.take_closed(300 * kMs).empty());  // nothing twice
  auto rest = timeline.take_all();
  ASSERT_EQ(rest.size(), 1u);  // device 0's interval 3, up to its last activity
  EXPECT_EQ(rest[0].start_ns, 300 * kMs);
  EXPECT_DOUBLE_EQ(rest[0].busy_ms, 10);
}

TEST(ActivityTimeline, AKernelAcrossABoundaryCountsInBoth) {
  Timeline timeline(100 * kMs);
  timeline.add(kernel(90, 130, ActivityKind::Nccl));
  auto all = timeline.take_all();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_DOUBLE_EQ(all[0].nccl_ms, 10);
  EXPECT_DOUBLE_EQ(all[1].nccl_ms, 30);
  EXPECT_EQ(all[0].nccl_kernels + all[1].nccl_kernels, 1);  // counted where it started
}

TEST(ActivityTimeline, LateRecordsAreCountedNotWrittenTwice) {
  Timeline timeline(100 * kMs);
  timeline.add(kernel(10, 20));
  timeline.add(kernel(110, 120));
  ASSERT_EQ(timeline.take_closed(100 * kMs).size(), 1u);
  timeline.add(kernel(30, 40));  // arrives after interval 0 was written
  auto rest = timeline.take_all();
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].late, 1);
  EXPECT_DOUBLE_EQ(rest[0].busy_ms, 10);
}

}  // namespace
}  // namespace faultline::gpu
