// Tests for harness/launch/slurm_commands.cpp: Slurm host lists and job states (the parts that
// need no cluster; the rest is tested on a real one, tests/e2e/test_slurm.cpp).
#include <gtest/gtest.h>

#include "harness/launch/slurm_commands.hpp"

namespace faultline::harness::slurm {
namespace {

TEST(SlurmCommands, TheFirstHostOfAHostList) {
  EXPECT_EQ(first_host("n1"), "n1");
  EXPECT_EQ(first_host("n[3-4,7]"), "n3");
  EXPECT_EQ(first_host("n[12,3],m1"), "n12");
  EXPECT_EQ(first_host("gpu01,n[1-2]"), "gpu01");
  EXPECT_EQ(first_host("rack[2-3]-node7"), "rack2-node7");
}

TEST(SlurmCommands, OnlyEndedJobStatesAreFinal) {
  for (const char* state :
       {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED"})
    EXPECT_TRUE(is_final_state(state)) << state;
  for (const char* state : {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", ""})
    EXPECT_FALSE(is_final_state(state)) << state;
}

TEST(SlurmCommands, JobStatesTheSchedulerEndsWithAreReportsTheOthersAreNot) {
  EXPECT_EQ(end_of_job("TIMEOUT", "7", "n1", "TimeLimit")->end, SchedulerEnd::TimeLimit);
  EXPECT_EQ(end_of_job("OUT_OF_MEMORY", "7", "n1", "None")->end, SchedulerEnd::OutOfMemory);
  const auto node_fail = end_of_job("NODE_FAIL", "7", "n[2-3]", "NodeDown");
  EXPECT_EQ(node_fail->end, SchedulerEnd::NodeFail);
  EXPECT_EQ(node_fail->node, "n[2-3]");
  EXPECT_EQ(node_fail->detail, "Slurm job 7 ended NODE_FAIL (NodeDown) on node(s) n[2-3]");
  EXPECT_EQ(end_of_job("CANCELLED", "7", "n1", "None")->end, SchedulerEnd::Cancelled);
  EXPECT_FALSE(end_of_job("COMPLETED", "7", "n1", "None"));
  EXPECT_FALSE(end_of_job("FAILED", "7", "n1", "NonZeroExitCode"));
}

TEST(SlurmCommands, WhatSlurmstepdSaysInSrunsOutputIsAReportNamingTheNode) {
  const auto timeout = end_in_step_output(
      "srun: Job step aborted\nslurmstepd-n1: error: *** JOB 4 ON n1 CANCELLED AT "
      "2026-12-04T17:21:51 DUE TO TIME LIMIT ***\n");
  ASSERT_TRUE(timeout);
  EXPECT_EQ(timeout->end, SchedulerEnd::TimeLimit);
  EXPECT_EQ(timeout->node, "n1");
  const auto node = end_in_step_output(
      "slurmstepd: error: *** STEP 5.0 ON n3 CANCELLED AT 2026-12-04T17:00:00 DUE TO NODE "
      "FAILURE ***\n");
  ASSERT_TRUE(node);
  EXPECT_EQ(node->end, SchedulerEnd::NodeFail);
  EXPECT_EQ(node->node, "n3");
  EXPECT_EQ(end_in_step_output("*** JOB 9 ON n2 CANCELLED AT 2026-12-04T17:00:00 ***")->end,
            SchedulerEnd::Cancelled);
  EXPECT_FALSE(end_in_step_output("srun: error: n1: task 1: Exited with exit code 3\n"));
}

}  // namespace
}  // namespace faultline::harness::slurm
