// Tests for harness/child_process.cpp and its users' contract: exit and signal decoding, a child
// reaped only by poll() after its group was killed, and no signal to a reaped child's group.
#include "harness/launch/child_process.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "harness/launch/subprocess.hpp"
#include "test_support.hpp"

namespace faultline::harness {
namespace {
using faultline::testing::ScratchDir;
using Clock = std::chrono::steady_clock;

// "R", "S", "Z", ... from /proc/<pid>/stat; "" once the pid is gone.
std::string process_state(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() ? "" : text.substr(paren + 2, 1);
}

// Polls `done` until it holds or 30 s pass (a loaded machine may be slow, never that slow).
bool eventually(const std::function<bool()>& done) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

ChildSpec command(std::vector<std::string> argv) {
  ChildSpec spec;
  spec.argv = std::move(argv);
  return spec;
}

ChildExit wait_for(ChildProcess& child) {
  std::optional<ChildExit> exit;
  EXPECT_TRUE(eventually([&] { return (exit = child.poll()).has_value(); }));
  return exit.value_or(ChildExit{});
}

pid_t read_pid(const std::string& path) {
  pid_t pid = 0;
  EXPECT_TRUE(eventually([&] { return (std::ifstream(path) >> pid) && pid > 0; })) << path;
  return pid;
}

bool dead(pid_t pid) {
  const std::string state = process_state(pid);
  return state.empty() || state == "Z";
}

TEST(ChildProcess, ExitCodeAndSignalAreToldApart) {
  ChildProcess exits(command({"/bin/sh", "-c", "exit 3"}));
  ChildExit exit = wait_for(exits);
  EXPECT_EQ(exit.kind, ExitKind::Exited);
  EXPECT_EQ(exit.exit_code, 3);
  ChildProcess dies(command({"/bin/sh", "-c", "kill -SEGV $$"}));
  exit = wait_for(dies);
  EXPECT_EQ(exit.kind, ExitKind::Signaled);
  EXPECT_EQ(exit.signal, SIGSEGV);
}

TEST(ChildProcess, OutputGoesToTheFileInTheWorkingDirectoryAndANameIsLookedUpInPath) {
  ScratchDir dir;
  ChildSpec spec = command({"sh", "-c", "echo out; echo err >&2; pwd > where"});
  spec.cwd = dir.path();
  spec.output_path = dir.file("log");
  ChildProcess child(spec);
  EXPECT_EQ(wait_for(child).exit_code, 0);
  EXPECT_EQ(faultline::testing::read_file(dir.file("log")), "out\nerr\n");
  EXPECT_EQ(faultline::testing::read_file(dir.file("where")), dir.path() + "\n");
}

// A launcher's child must not inherit RANK from the harness (local_launcher.cpp): the variables
// named are taken out, the ones given are added, the rest are the harness's.
TEST(ChildProcess, ItsEnvironmentIsTheHarnesssLessWhatIsUnsetPlusWhatIsGiven) {
  ScratchDir dir;
  ASSERT_EQ(setenv("FAULTLINE_TEST_UNSET", "inherited", 1), 0);
  ASSERT_EQ(setenv("FAULTLINE_TEST_KEPT", "inherited", 1), 0);
  ChildSpec spec = command({"/bin/sh", "-c",
                            "echo \"${FAULTLINE_TEST_UNSET-unset} $FAULTLINE_TEST_KEPT "
                            "$FAULTLINE_TEST_GIVEN\""});
  spec.output_path = dir.file("log");
  spec.env = {{"FAULTLINE_TEST_GIVEN", "given"}};
  spec.unset_env = {"FAULTLINE_TEST_UNSET"};
  ChildProcess child(spec);
  EXPECT_EQ(wait_for(child).exit_code, 0);
  unsetenv("FAULTLINE_TEST_UNSET");
  unsetenv("FAULTLINE_TEST_KEPT");
  EXPECT_EQ(faultline::testing::read_file(dir.file("log")), "unset inherited given\n");
}

TEST(ChildProcess, ACommandThatCannotStartIsAnInfraErrorNamingIt) {
  try {
    ChildProcess child(command({"faultline-no-such-command"}));
    FAIL() << "expected an InfraError";
  } catch (const InfraError& error) {
    EXPECT_STREQ(error.what(), "cannot find 'faultline-no-such-command' in PATH");
  }
  EXPECT_THROW(ChildProcess(command({"/nonexistent/train"})), InfraError);
}

// The child stays a zombie (its pid, and so its group id, taken) until poll() has killed its
// group; only then is it reaped, and from then on its group is never signalled.
TEST(ChildProcess, PollKillsWhatTheChildLeftThenReapsAndNeverSignalsAgain) {
  ScratchDir dir;
  const std::string pid_file = dir.file("left.pid");
  ChildProcess child(command({"/bin/sh", "-c", "sleep 300 & echo $! > " + pid_file + "; exit 0"}));
  const pid_t left = read_pid(pid_file);
  ASSERT_TRUE(eventually([&] { return process_state(child.pid()) == "Z"; }));
  EXPECT_FALSE(dead(left));            // the group is left alone until poll() sees the end
  EXPECT_TRUE(child.signal_group(0));  // signal 0: the group still exists and is the child's
  ChildExit exit = wait_for(child);
  EXPECT_EQ(exit.kind, ExitKind::Exited);
  EXPECT_EQ(exit.exit_code, 0);
  EXPECT_EQ(process_state(child.pid()), "");  // reaped
  EXPECT_TRUE(eventually([&] { return dead(left); }));
  EXPECT_FALSE(child.signal_group(SIGKILL));  // reaped: its group id may be another's by now
  EXPECT_EQ(child.kill().exit_code, 0);       // and kill() reports the first end again
}

TEST(ChildProcess, KillEndsTheWholeGroupAndTheDestructorReapsARunningChild) {
  ScratchDir dir;
  const std::string pid_file = dir.file("left.pid");
  pid_t pid = 0;
  {
    ChildProcess child(
        command({"/bin/sh", "-c", "sleep 300 & echo $! > " + pid_file + "; sleep 300"}));
    pid = child.pid();
    const pid_t left = read_pid(pid_file);
    ChildExit exit = child.kill();
    EXPECT_EQ(exit.kind, ExitKind::Signaled);
    EXPECT_EQ(exit.signal, SIGKILL);
    EXPECT_TRUE(eventually([&] { return dead(left); }));
  }
  {
    ChildProcess child(command({"/bin/sleep", "300"}));
    pid = child.pid();
  }
  EXPECT_EQ(process_state(pid), "");
}

TEST(RunCommand, ATimeoutKillsTheCommandAndWhatItStarted) {
  ScratchDir dir;
  const std::string pid_file = dir.file("left.pid");
  CommandSpec spec;
  spec.argv = {"/bin/sh", "-c", "sleep 300 & echo $! > " + pid_file + "; sleep 300"};
  spec.timeout_s = 1;  // the command would take 300 s: a margin no loaded machine eats
  const CommandResult result = run_command(spec);
  EXPECT_EQ(result.end, CommandEnd::TimedOut);
  EXPECT_LT(result.wall_s, 60);
  EXPECT_EQ(describe(result, spec), "timed out after 1 s");
  EXPECT_TRUE(eventually([&] { return dead(read_pid(pid_file)); }));
}

TEST(RunCommand, ExitAndSignalAreReported) {
  CommandSpec spec;
  spec.argv = {"/bin/sh", "-c", "exit 4"};
  CommandResult result = run_command(spec);
  EXPECT_EQ(result.end, CommandEnd::Exited);
  EXPECT_EQ(describe(result, spec), "exit 4");
  spec.argv = {"/bin/sh", "-c", "kill -TERM $$"};
  result = run_command(spec);
  EXPECT_EQ(describe(result, spec), "killed by SIGTERM");
}

// A captured command's output files have no name, even while it runs: a faultline killed by
// SIGKILL (no destructor runs) leaves nothing in the temporary directory.
TEST(RunCommand, ACapturedCommandsOutputFilesHaveNoNameWhileItRuns) {
  ScratchDir dir;
  const char* old = std::getenv("TMPDIR");
  const std::string kept = old ? old : "";
  setenv("TMPDIR", dir.path().c_str(), 1);
  CommandSpec spec;
  spec.argv = {"/bin/sh", "-c", "ls -A \"$TMPDIR\"; echo to-stderr >&2; exit 3"};
  const auto captured = run_captured(spec);
  if (old)
    setenv("TMPDIR", kept.c_str(), 1);
  else
    unsetenv("TMPDIR");
  EXPECT_EQ(captured.result.exit_code, 3);
  EXPECT_EQ(captured.out, "") << "files in the temporary directory while it ran";
  EXPECT_EQ(captured.err, "to-stderr\n");
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace faultline::harness
