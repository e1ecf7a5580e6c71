// Tests for harness/launch/hang_report.cpp: the ranks of a hang named from their last step records
// and collective heartbeats, as the supervisor and an import of a stopped job both name them.
#include "harness/launch/hang_report.hpp"

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace faultline::harness {
namespace {
using faultline::testing::ScratchDir;
using faultline::testing::write_file;

TEST(HangReport, RanksThatNeverEnteredTheCollectiveOthersWaitInAreTheHungOnes) {
  // Ranks 0 and 2 entered collective #132 (step 130); rank 1 never did, after step 129.
  const HangReport hang = describe_hang({129, 129, 129}, {132, 131, 132}, 5);
  EXPECT_EQ(hang.ranks, std::vector<int>{1});
  EXPECT_EQ(hang.waiting, (std::vector<int>{0, 2}));
  EXPECT_EQ(hang.collective, 132);
  EXPECT_EQ(hang.step, 130);
  EXPECT_EQ(collective_wait(hang),
            "rank(s) 1 never entered collective #132 (step 130) that rank(s) 0,2 wait in");
}

TEST(HangReport, WithoutHeartbeatsTheRanksBehindAreNamedAndNoCollective) {
  const HangReport behind = describe_hang({40, 37, 40}, {0, 0, 0}, 61);
  EXPECT_EQ(behind.ranks, std::vector<int>{1});
  EXPECT_EQ(behind.step, 38);
  EXPECT_EQ(behind.collective, 0);
  EXPECT_EQ(collective_wait(behind), "");
  // All in the same place, in the same collective: none stands out, so all are named.
  const HangReport level = describe_hang({12, 12}, {13, 13}, 61);
  EXPECT_EQ(level.ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(level.step, 13);
  EXPECT_EQ(level.collective, 0);
  EXPECT_TRUE(describe_hang({}, {}, 0).ranks.empty());
}

TEST(HangReport, StacksAreTheFaulthandlerBlocksOfALogAndNothingElse) {
  ScratchDir dir;
  write_file(dir.file("rank1.log"),
             "step 129 loss 1.56\n"
             "Current thread 0x00007fe92b6c2040 (most recent call first):\n"
             "  File \"train.py\", line 209 in at_step_start\n"
             "  File \"train.py\", line 325 in <module>\n");
  EXPECT_EQ(stacks_in_log(dir.file("rank1.log")),
            "\n    Current thread 0x00007fe92b6c2040 (most recent call first):"
            "\n      File \"train.py\", line 209 in at_step_start"
            "\n      File \"train.py\", line 325 in <module>");
  // Signalled twice, it dumped the same stacks twice: shown once. A different dump is kept.
  const std::string dump =
      "Current thread 0x00007fe92b6c2040 (most recent call first):\n"
      "  File \"train.py\", line 209 in at_step_start\n";
  write_file(dir.file("twice.txt"), dump + dump + "Thread 0x01 (most recent call first):\n");
  EXPECT_EQ(stacks_in_log(dir.file("twice.txt")),
            "\n    Current thread 0x00007fe92b6c2040 (most recent call first):"
            "\n      File \"train.py\", line 209 in at_step_start"
            "\n    Thread 0x01 (most recent call first):");
  // A crash's dump (faulthandler on SIGSEGV) ends at the blank line before its module list.
  write_file(dir.file("crash.log"),
             "Fatal Python error: Segmentation fault\n\n" + dump +
                 "\nExtension modules: torch._C, numpy.core._multiarray_umath (total: 2)\n");
  EXPECT_EQ(stacks_in_log(dir.file("crash.log")),
            "\n    Current thread 0x00007fe92b6c2040 (most recent call first):"
            "\n      File \"train.py\", line 209 in at_step_start");
  write_file(dir.file("quiet.log"), "step 1 loss 2.0\n");
  EXPECT_EQ(stacks_in_log(dir.file("quiet.log")), "");
  EXPECT_EQ(stacks_in_log(dir.file("missing.txt")), "");
}

// The signal landed on the helper's watchdog thread, whose block faulthandler prints first: the
// script's own threads come first, the helper's (faultline_probe.py, threading.py) after them.
TEST(HangReport, TheHelpersOwnThreadsComeAfterTheScripts) {
  ScratchDir dir;
  write_file(dir.file("rank1.log"),
             "Current thread 0x02 (most recent call first):\n"
             "  File \"/usr/share/faultline/python/faultline_probe.py\", line 90 in _watch\n"
             "  File \"/usr/lib/python3.11/threading.py\", line 975 in run\n"
             "\n"
             "Thread 0x01 (most recent call first):\n"
             "  File \"train.py\", line 209 in at_step_start\n"
             "  File \"/usr/share/faultline/python/faultline_probe.py\", line 40 in step\n");
  EXPECT_EQ(stacks_in_log(dir.file("rank1.log")),
            "\n    Thread 0x01 (most recent call first):"
            "\n      File \"train.py\", line 209 in at_step_start"
            "\n      File \"/usr/share/faultline/python/faultline_probe.py\", line 40 in step"
            "\n    Current thread 0x02 (most recent call first):"
            "\n      File \"/usr/share/faultline/python/faultline_probe.py\", line 90 in _watch"
            "\n      File \"/usr/lib/python3.11/threading.py\", line 975 in run");
}

}  // namespace
}  // namespace faultline::harness
