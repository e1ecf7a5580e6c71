// Tests for harness/launch/process_tree.cpp: the processes below one, read from /proc, and
// signals sent only to a process that is still the one seen.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <thread>

#include "harness/launch/process_tree.hpp"

namespace faultline::harness {
namespace {

// A child that starts a grandchild (sleep) and waits: (child pid, grandchild pid).
std::pair<pid_t, pid_t> child_with_grandchild() {
  int pipe_fds[2];
  EXPECT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  if (child == 0) {
    const pid_t grandchild = fork();
    if (grandchild == 0) {
      setsid();  // a session of its own, as torchrun's ranks have
      execl("/bin/sleep", "sleep", "300", nullptr);
      _exit(127);
    }
    (void)!write(pipe_fds[1], &grandchild, sizeof grandchild);
    waitpid(grandchild, nullptr, 0);
    _exit(0);
  }
  pid_t grandchild = 0;
  EXPECT_EQ(read(pipe_fds[0], &grandchild, sizeof grandchild),
            static_cast<ssize_t>(sizeof grandchild));
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  return {child, grandchild};
}

bool has(const std::vector<SeenProcess>& processes, pid_t pid) {
  for (const auto& process : processes)
    if (process.pid == pid) return true;
  return false;
}

TEST(ProcessTree, DescendantsReachAGrandchildInASessionOfItsOwnDownToTheDepthAsked) {
  const auto [child, grandchild] = child_with_grandchild();
  const auto all = descendants(getpid());
  EXPECT_TRUE(has(all, child));
  EXPECT_TRUE(has(all, grandchild));
  const auto children = descendants(getpid(), 1);
  EXPECT_TRUE(has(children, child));
  EXPECT_FALSE(has(children, grandchild));
  EXPECT_FALSE(has(descendants(child), child)) << "a process is not below itself";

  signal_seen(descendants(child), SIGKILL);  // the grandchild dies, its parent reaps it
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status));
}

TEST(ProcessTree, AProcessNoLongerTheOneSeenIsNotSignalled) {
  const auto [child, grandchild] = child_with_grandchild();
  auto seen = descendants(child);
  ASSERT_EQ(seen.size(), 1u);
  // The same pid with another start time stands for a later process given that pid.
  auto other = seen;
  other[0].started += 1;
  signal_seen(other, SIGKILL);
  EXPECT_EQ(kill(grandchild, 0), 0) << "signalled a process it did not see";
  signal_seen(seen, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
}

// A shell (no variable) that starts a shell with FAULTLINE_TEST_RANK set, which starts a sleep
// that inherits it: the inner shell is the outermost process setting it, the sleep is not.
TEST(ProcessTree, TheOutermostProcessesSettingAVariableAreFoundBelowOnesThatDoNot) {
  unsetenv("FAULTLINE_TEST_RANK");
  const pid_t outer = fork();
  if (outer == 0) {
    execl("/bin/sh", "sh", "-c", "FAULTLINE_TEST_RANK=3 /bin/sh -c 'sleep 300 & wait' & wait",
          nullptr);
    _exit(127);
  }
  std::vector<SeenProcess> below;
  for (int tries = 0; tries < 3000 && below.size() < 2; ++tries) {  // up to 30 s: a busy machine
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    below = descendants(outer);
  }
  ASSERT_EQ(below.size(), 2u);
  const auto children = descendants(outer, 1);
  ASSERT_EQ(children.size(), 1u);
  const auto found = outermost_setting(outer, "FAULTLINE_TEST_RANK");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].pid, children[0].pid) << "the inner shell, not the sleep below it";
  EXPECT_TRUE(outermost_setting(outer, "FAULTLINE_TEST_NOWHERE").empty());
  EXPECT_TRUE(outermost_setting(getpid(), "FAULTLINE_TEST_RANK").size() == 1u)
      << "a process that does not set it is looked below";

  signal_seen(below, SIGKILL);
  kill(outer, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(outer, &status, 0), outer);
}

}  // namespace
}  // namespace faultline::harness
