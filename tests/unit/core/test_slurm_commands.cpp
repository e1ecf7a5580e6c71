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

}  // namespace
}  // namespace faultline::harness::slurm
