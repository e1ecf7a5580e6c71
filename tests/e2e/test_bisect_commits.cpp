// End-to-end: `bisect commits --test` on real git histories (linear, merge-heavy) with planted
// regressions, skips, a seeded flaky test, a killed run that resumes, and bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "store/store.hpp"
#include "support/cli.hpp"
#include "support/git_fixture.hpp"

using namespace faultline::testing;
using ::testing::HasSubstr;

namespace {

// Bad from the commit that adds the file `regression` on; 125 (untestable) where `untestable` is.
const std::string kTest = "if [ -e untestable ]; then exit 125; fi; test ! -e regression";

struct Linear {
  std::string root;                 // good
  std::vector<std::string> commit;  // commit[k] is c<k>, k = 1..n; commit[0] == root
};

// root, then c1..cn; `files(k)` adds files to c<k> (the regression stays once added).
Linear linear(GitFixture& repo, int n,
              const std::function<std::map<std::string, std::string>(int)>& files) {
  Linear history;
  history.root = repo.commit("root", {{"n", "0"}});
  history.commit.push_back(history.root);
  for (int k = 1; k <= n; ++k) {
    auto changes = files(k);
    changes["n"] = std::to_string(k);
    history.commit.push_back(repo.commit(numbered("c", k), changes));
  }
  return history;
}

Cli bisect(const GitFixture& repo, const std::string& good, const std::string& bad,
           std::vector<std::string> extra, const std::string& dir,
           std::function<bool()> kill = {}) {
  std::vector<std::string> args = {"bisect", "commits", "--repo", repo.dir(), "--good",
                                   good,     "--bad",   bad,      "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  return faultline_cli(args, dir, 120, std::move(kill));
}

std::map<std::string, std::string> regression_from(int k, int first_bad) {
  if (k == first_bad) return {{"regression", "1"}};
  return {};
}

int line_count(const std::string& path) {
  std::ifstream in(path);
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

}  // namespace

TEST(BisectCommits, LinearHistoryFindsThePlantedRegressionInLogSteps) {
  GitFixture repo(make_temp_dir("bc-linear"));
  const auto history = linear(repo, 20, [](int k) { return regression_from(k, 13); });
  const std::string head = repo.head(), status = repo.status();
  const std::string dir = make_temp_dir("bc-linear-run");
  auto cli = bisect(repo, history.root, "HEAD", {"--test", kTest}, dir);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("culprit"), history.commit[13]);
  EXPECT_EQ(cli.doc.at("parent"), history.commit[12]);
  EXPECT_EQ(cli.doc.at("subject"), "c13");
  EXPECT_EQ(cli.doc.at("confidence"), 1.0);
  EXPECT_EQ(cli.doc.at("candidates"), 20);
  const int executions = cli.doc.at("executions").get<int>();
  EXPECT_LE(executions, static_cast<int>(std::ceil(std::log2(20.0))) + 1);
  // The range's ends are judged first (bad, then good), and are not among the search's verdicts.
  EXPECT_EQ(cli.doc.at("executed"), executions + 2);
  EXPECT_EQ(cli.doc.at("runs").at(0).at("commit"), history.commit[20]);
  EXPECT_EQ(cli.doc.at("runs").at(0).at("verdict"), "bad");
  EXPECT_EQ(cli.doc.at("runs").at(1).at("commit"), history.root);
  EXPECT_EQ(cli.doc.at("runs").at(1).at("verdict"), "good");
  EXPECT_EQ(cli.doc.at("verdicts").size(), static_cast<size_t>(executions));
  EXPECT_TRUE(cli.doc.at("skipped").empty());
  EXPECT_THAT(cli.result.output, HasSubstr("faultline bisect commits: run 1 (20 candidates)"));
  // Each run's line counts down as git does, to the one commit left.
  EXPECT_THAT(cli.result.output,
              ::testing::ContainsRegex("run 1 \\(20 candidates\\): .*; [0-9]+ revision\\(s\\) "
                                       "left, roughly [0-9]+ step\\(s\\)"));
  EXPECT_THAT(cli.result.output, HasSubstr("; 1 revision(s) left, roughly 0 step(s)"));
  // The user's checkout is untouched, and no worktree is left behind.
  EXPECT_EQ(repo.head(), head);
  EXPECT_EQ(repo.status(), status);
  EXPECT_EQ(repo.linked_worktrees(), 0);
  EXPECT_TRUE(std::filesystem::is_empty(dir + "/runs/worktrees"));

  // The same command again: every verdict comes from the store, nothing runs.
  auto again = bisect(repo, history.root, "HEAD", {"--test", kTest}, dir);
  ASSERT_EQ(again.result.exit_code, 0) << again.result.output;
  EXPECT_EQ(again.doc.at("culprit"), history.commit[13]);
  EXPECT_EQ(again.doc.at("executed"), 0);
  EXPECT_EQ(again.doc.at("reused"), executions + 2);
}

// A test script outside the repository, named by its path, then fixed: the stored verdicts of
// the old script are not the new one's (a re-run repeated the wrong answer, every verdict from
// the store). Unchanged, it reuses them as any test does.
TEST(BisectCommits, AnEditedTestScriptOutsideTheRepoIsJudgedAfresh) {
  GitFixture repo(make_temp_dir("bc-script"));
  const auto history = linear(repo, 8, [](int k) { return regression_from(k, 6); });
  const std::string dir = make_temp_dir("bc-script-run");
  const std::string script = dir + "/check.sh";
  // Wrong: fails from c3 on, whatever the commit holds.
  std::ofstream(script) << "#!/bin/sh\ntest \"$(cat n)\" -lt 3\n";
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  auto wrong = bisect(repo, history.root, "HEAD", {"--test", script}, dir);
  ASSERT_EQ(wrong.result.exit_code, 0) << wrong.result.output;
  EXPECT_EQ(wrong.doc.at("culprit"), history.commit[3]);
  std::ofstream(script) << "#!/bin/sh\ntest ! -e regression\n";  // fixed
  auto fixed = bisect(repo, history.root, "HEAD", {"--test", script}, dir);
  ASSERT_EQ(fixed.result.exit_code, 0) << fixed.result.output;
  EXPECT_EQ(fixed.doc.at("culprit"), history.commit[6]);
  EXPECT_GT(fixed.doc.at("executed").get<int>(), 0);
  auto again = bisect(repo, history.root, "HEAD", {"--test", script}, dir);
  EXPECT_EQ(again.doc.at("executed"), 0);
}

TEST(BisectCommits, ARangeWhoseEndsContradictTheirLabelsIsRefusedBeforeTheSearch) {
  GitFixture repo(make_temp_dir("bc-ends"));
  const auto history = linear(repo, 10, [](int k) { return regression_from(k, 6); });
  const std::string dir = make_temp_dir("bc-ends-run");
  // Both ends good: git would blame the bad end itself, never run.
  auto passing_bad = bisect(repo, history.root, history.commit[4], {"--test", kTest}, dir);
  EXPECT_EQ(passing_bad.result.exit_code, 2) << passing_bad.result.output;
  EXPECT_THAT(passing_bad.result.output,
              HasSubstr("the bad commit " + history.commit[4] + " passes: exit 0"));
  EXPECT_THAT(passing_bad.result.output, HasSubstr("--ends trust"));
  // The good end already bad: git would blame a commit after it.
  auto failing_good = bisect(repo, history.commit[8], "HEAD", {"--test", kTest}, dir);
  EXPECT_EQ(failing_good.result.exit_code, 2) << failing_good.result.output;
  EXPECT_THAT(failing_good.result.output,
              HasSubstr("the good commit " + history.commit[8] + " fails: exit 1"));
  EXPECT_EQ(failing_good.doc.at("error").at("items").at(0).at("where"),
            "--good " + history.commit[8]);
  // --ends trust takes them as given, as git does: a culprit, and a wrong one.
  auto trusted = bisect(repo, history.commit[8], "HEAD", {"--test", kTest, "--ends", "trust"}, dir);
  ASSERT_EQ(trusted.result.exit_code, 0) << trusted.result.output;
  EXPECT_EQ(trusted.doc.at("culprit"), history.commit[9]);
  auto bad_value = bisect(repo, history.root, "HEAD", {"--test", kTest, "--ends", "maybe"}, dir);
  EXPECT_EQ(bad_value.result.exit_code, 2);
  EXPECT_THAT(bad_value.result.output, HasSubstr("--ends: maybe not in {check,trust}"));
}

TEST(BisectCommits, MergeHeavyHistoryFindsTheSideBranchCommitAndAnEvilMerge) {
  GitFixture repo(make_temp_dir("bc-merge"));
  const std::string root = repo.commit("root", {{"main", "0"}});
  for (int i = 1; i <= 3; ++i) repo.commit(numbered("m", i), {{"main", std::to_string(i)}});
  repo.git({"checkout", "-q", "-b", "a", "HEAD~1"});
  repo.commit("a1", {{"a", "1"}});
  const std::string a2 = repo.commit("a2", {{"a", "2"}, {"regression", "1"}});
  repo.commit("a3", {{"a", "3"}});
  repo.git({"checkout", "-q", "-b", "b", root});
  for (int i = 1; i <= 4; ++i) repo.commit(numbered("b", i), {{"b", std::to_string(i)}});
  repo.git({"checkout", "-q", "main"});
  repo.git({"merge", "-q", "--no-ff", "-m", "merge a", "a"});
  repo.commit("m4", {{"main", "4"}});
  repo.git({"merge", "-q", "--no-ff", "-m", "merge b", "b"});
  repo.commit("m5", {{"main", "5"}});
  const std::string dir = make_temp_dir("bc-merge-run");
  auto cli = bisect(repo, root, "main", {"--test", kTest}, dir);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("culprit"), a2);
  EXPECT_EQ(cli.doc.at("subject"), "a2");
  EXPECT_LE(cli.doc.at("executions").get<int>(), 5);

  // Two branches fine on their own, bad together: the merge is the first bad commit.
  repo.git({"checkout", "-q", "-b", "x", "main"});
  const std::string clean = repo.commit("drop regression", {{"regression", ""}});
  repo.commit("x1", {{"x", "1"}});
  repo.git({"checkout", "-q", "-b", "y", clean});
  repo.commit("y1", {{"y", "1"}});
  repo.commit("y2", {{"y", "2"}});
  repo.git({"merge", "-q", "--no-ff", "-m", "evil merge", "x"});
  const std::string merge = repo.head();
  repo.commit("after", {{"y", "3"}});
  auto evil = bisect(repo, clean, "HEAD", {"--test", "! { [ -e x ] && [ -e y ]; }"}, dir);
  ASSERT_EQ(evil.result.exit_code, 0) << evil.result.output;
  EXPECT_EQ(evil.doc.at("culprit"), merge);
  EXPECT_EQ(evil.doc.at("parents").size(), 2u);
}

TEST(BisectCommits, FailingBuildsAreSkippedAndTheCulpritIsStillFound) {
  GitFixture repo(make_temp_dir("bc-build"));
  // c7..c9 do not build; c8 is where git would look first among 16 candidates.
  const auto history = linear(repo, 16, [](int k) {
    auto files = regression_from(k, 12);
    if (k == 7) files["broken"] = "1";
    if (k == 10) files["broken"] = "";
    return files;
  });
  const std::string dir = make_temp_dir("bc-build-run");
  const std::vector<std::string> args = {"--test", kTest, "--build", "test ! -e broken"};
  auto cli = bisect(repo, history.root, "HEAD", args, dir);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("culprit"), history.commit[12]);
  ASSERT_FALSE(cli.doc.at("skipped").empty());
  EXPECT_EQ(cli.doc.at("skipped").at(0), history.commit[8]);
  for (const auto& skipped : cli.doc.at("skipped"))
    EXPECT_TRUE(skipped == history.commit[7] || skipped == history.commit[8] ||
                skipped == history.commit[9])
        << skipped;
  // After the ends (runs 0 and 1), the first commit tried did not build.
  EXPECT_THAT(cli.doc.at("runs").at(2).at("detail").get<std::string>(),
              HasSubstr("build failed: exit 1"));
  EXPECT_EQ(repo.linked_worktrees(), 0);
}

TEST(BisectCommits, UntestableCommitsAroundTheCulpritLeaveTheAmbiguousSet) {
  GitFixture repo(make_temp_dir("bc-skip"));
  const auto history = linear(repo, 8, [](int k) {
    auto files = regression_from(k, 5);
    if (k == 4) files["untestable"] = "1";
    if (k == 6) files["untestable"] = "";
    return files;
  });
  auto cli = bisect(repo, history.root, "HEAD", {"--test", kTest}, make_temp_dir("bc-skip-run"));
  ASSERT_EQ(cli.result.exit_code, 3) << cli.result.output;
  EXPECT_EQ(cli.doc.at("answer"), "only_skipped_left");
  EXPECT_TRUE(cli.doc.at("culprit").is_null());
  const auto& possible = cli.doc.at("possible");
  EXPECT_NE(std::find(possible.begin(), possible.end(), history.commit[4]), possible.end());
  EXPECT_NE(std::find(possible.begin(), possible.end(), history.commit[5]), possible.end());
  EXPECT_EQ(cli.doc.at("skipped").size(), 2u);
}

// A seeded pseudo-flake: from the regression on a run passes 1 time in 10, before it a run
// fails 1 time in 40 (the defaults of --p-bad-looks-good and --p-good-looks-bad). The draw is
// keyed on the commit and the run number, so it is the same on every test run.
TEST(BisectCommits, FlakyTestWithFlakyFindsTheCulpritAndReportsConfidence) {
  GitFixture repo(make_temp_dir("bc-flaky"));
  const auto history = linear(repo, 30, [](int k) { return regression_from(k, 17); });
  const std::string flaky =
      "h=$(printf '%s' \"$FAULTLINE_BISECT_COMMIT.$FAULTLINE_BISECT_RUN\" | cksum | cut -d' ' "
      "-f1); if [ -e regression ]; then [ $((h % 10)) -eq 0 ] && exit 0; exit 1; fi; "
      "[ $((h % 40)) -eq 0 ] && exit 1; exit 0";
  auto cli = bisect(repo, history.root, "HEAD", {"--test", flaky, "--flaky"},
                    make_temp_dir("bc-flaky-run"));
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("answer"), "culprit");
  EXPECT_EQ(cli.doc.at("culprit"), history.commit[17]);
  EXPECT_GE(cli.doc.at("confidence").get<double>(), 0.99);
  EXPECT_LE(cli.doc.at("executions").get<int>(), 60);
  EXPECT_EQ(repo.linked_worktrees(), 0);

  // Nothing is really broken: the failure that started the hunt was the flake.
  auto none = bisect(repo, history.root, "HEAD", {"--test", "exit 0", "--flaky"},
                     make_temp_dir("bc-flake-run"));
  ASSERT_EQ(none.result.exit_code, 3) << none.result.output;
  EXPECT_EQ(none.doc.at("answer"), "no_culprit");
  EXPECT_GE(none.doc.at("confidence").get<double>(), 0.99);
}

TEST(BisectCommits, KilledBisectionResumesWithoutRerunningFinishedCommits) {
  GitFixture repo(make_temp_dir("bc-kill"));
  const auto history = linear(repo, 24, [](int k) { return regression_from(k, 7); });
  const std::string head = repo.head(), status = repo.status();
  const std::string dir = make_temp_dir("bc-kill-run");
  const std::string counter = dir + "/executions.txt";
  std::string test = "sleep 0.3; echo \"$FAULTLINE_BISECT_COMMIT\" >> ";
  test += counter + "; " + kTest;
  const std::vector<std::string> args = {"--test", test};
  auto killed =
      bisect(repo, history.root, "HEAD", args, dir, [&] { return line_count(counter) >= 4; });
  ASSERT_EQ(killed.result.signal, SIGKILL) << killed.result.output;  // past the ends' two runs
  const int before = line_count(counter);

  auto resumed = bisect(repo, history.root, "HEAD", args, dir);
  ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.output;
  EXPECT_EQ(resumed.doc.at("culprit"), history.commit[7]);
  EXPECT_TRUE(resumed.doc.at("resumed").get<bool>());
  const int executions = resumed.doc.at("executions").get<int>();
  // Every verdict stored before the kill is reused; at most the run the kill cut short repeats.
  // The ends' two runs come on top of the search's verdicts.
  EXPECT_EQ(line_count(counter) - before, resumed.doc.at("executed").get<int>());
  EXPECT_LE(line_count(counter), executions + 2 + 1);
  EXPECT_LT(resumed.doc.at("executed").get<int>(), executions);
  // The runs before the kill are listed and counted as taken from the store.
  EXPECT_EQ(resumed.doc.at("runs").size(), static_cast<size_t>(executions + 2));
  EXPECT_EQ(resumed.doc.at("executed").get<int>() + resumed.doc.at("reused").get<int>(),
            executions + 2);
  EXPECT_EQ(repo.head(), head);
  EXPECT_EQ(repo.status(), status);
  EXPECT_EQ(repo.linked_worktrees(), 0) << "the killed run's worktree is cleaned up";
}

TEST(BisectCommits, TestExitAbove127OrASignalAbortsWithExitFour) {
  GitFixture repo(make_temp_dir("bc-abort"));
  const auto history = linear(repo, 6, [](int k) { return regression_from(k, 3); });
  const std::string dir = make_temp_dir("bc-abort-run");
  auto code = bisect(repo, history.root, "HEAD", {"--test", "exit 129"}, dir);
  EXPECT_EQ(code.result.exit_code, 4) << code.result.output;
  EXPECT_THAT(code.result.output, HasSubstr("the test command at commit "));
  EXPECT_THAT(code.result.output, HasSubstr(": exit 129, which aborts the bisection"));
  auto signal = bisect(repo, history.root, "HEAD", {"--test", "kill -SEGV $$"}, dir);
  EXPECT_EQ(signal.result.exit_code, 4) << signal.result.output;
  EXPECT_THAT(signal.result.output, HasSubstr(": killed by SIGSEGV, which aborts the bisection"));
}

TEST(BisectCommits, BadInputIsExitTwoWithTheReason) {
  GitFixture repo(make_temp_dir("bc-bad"));
  const auto history = linear(repo, 4, [](int k) { return regression_from(k, 2); });
  const std::string dir = make_temp_dir("bc-bad-run");
  auto expect_error = [&](const Cli& cli, const std::string& message) {
    EXPECT_EQ(cli.result.exit_code, 2) << cli.result.output;
    EXPECT_THAT(cli.result.output, HasSubstr(message));
  };
  const std::string plain = make_temp_dir("bc-not-a-repo");
  auto run = [&](const std::string& repo_dir, const std::string& good, const std::string& bad,
                 std::vector<std::string> extra) {
    std::vector<std::string> args = {"bisect", "commits", "--repo", repo_dir,
                                     "--good", good,      "--bad",  bad};
    args.insert(args.end(), extra.begin(), extra.end());
    return faultline_cli(args, dir);
  };
  expect_error(run(plain, "HEAD~1", "HEAD", {"--test", "true"}),
               "faultline: error: not a git work tree");
  expect_error(run(dir + "/missing", "HEAD~1", "HEAD", {"--test", "true"}),
               "faultline: error: not a directory");
  expect_error(run(repo.dir(), "nosuchrev", "HEAD", {"--test", "true"}),
               "faultline: error: unknown revision 'nosuchrev' (--good in ");
  expect_error(run(repo.dir(), history.commit[3], history.commit[1], {"--test", "true"}),
               "is not an ancestor of bad");
  expect_error(run(repo.dir(), "HEAD", "HEAD", {"--test", "true"}), "the same commit");
  expect_error(run(repo.dir(), history.root, "HEAD", {}),
               "faultline: error: nothing to judge a commit by (--test/--recipe); give exactly");
  expect_error(run(repo.dir(), history.root, "HEAD", {"--test", "true", "--recipe", "r.toml"}),
               "faultline: error: both --test and --recipe");
  expect_error(
      run(repo.dir(), history.root, "HEAD", {"--test", "true", "--flaky", "--confidence", "2"}),
      "--confidence 2 is out of range");
  expect_error(run(repo.dir(), history.root, "HEAD", {"--recipe", "r.toml", "--kind", "sloww"}),
               "unknown failure kind 'sloww'");
  expect_error(run(repo.dir(), history.root, "HEAD", {"--test", "true", "--jobs", "0"}),
               "faultline: error: --jobs: 0 is not an integer >= 1 (command line); see `faultline "
               "bisect commits --help`");
}
