// Test support: real git repositories built in a test, with fixed author, committer and dates so
// that commit ids (and pseudo-random flakes keyed on them) are the same on every run.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/text.hpp"
#include "support/process.hpp"

namespace faultline::testing {

// "c" + std::to_string(k) without GCC 12's -Wrestrict false positive on `"literal" + string`.
inline std::string numbered(const std::string& prefix, int k) {
  std::string name = prefix;
  name += std::to_string(k);
  return name;
}

inline std::string git_executable() {
  std::istringstream path(std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin");
  for (std::string dir; std::getline(path, dir, ':');) {
    const std::string candidate = dir + "/git";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "/usr/bin/git";
}

class GitFixture {
 public:
  explicit GitFixture(std::string dir) : dir_(std::move(dir)) { git({"init", "-q", "-b", "main"}); }

  const std::string& dir() const { return dir_; }

  // `git ARGS` in the repository; its output without the final newline. Fails the test on a
  // non-zero exit.
  std::string git(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {git_executable(), "-C", dir_};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string date = "2024-01-01T00:00:00+0000";
    auto result = run_process({argv,
                               {{"GIT_AUTHOR_NAME", "Test"},
                                {"GIT_AUTHOR_EMAIL", "test@example.com"},
                                {"GIT_AUTHOR_DATE", date},
                                {"GIT_COMMITTER_NAME", "Test"},
                                {"GIT_COMMITTER_EMAIL", "test@example.com"},
                                {"GIT_COMMITTER_DATE", date},
                                {"GIT_CONFIG_NOSYSTEM", "1"},
                                {"GIT_CONFIG_GLOBAL", "/dev/null"}},
                               60});
    std::string command;
    for (const auto& arg : args) {
      command += " ";
      command += arg;
    }
    EXPECT_EQ(result.exit_code, 0) << "git" << command << ": " << result.output;
    std::string out = result.output;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  // Writes (or with an empty text removes) files, commits everything, returns the commit id.
  std::string commit(const std::string& message, const std::map<std::string, std::string>& files) {
    for (const auto& [name, text] : files) {
      const std::string path = dir_ + "/" + name;
      if (text.empty()) {
        std::remove(path.c_str());
      } else {
        std::ofstream(path) << text;
      }
    }
    git({"add", "-A"});
    git({"commit", "-q", "--allow-empty", "-m", message});
    return head();
  }

  std::string head() { return git({"rev-parse", "HEAD"}); }
  std::string status() { return git({"status", "--porcelain"}); }
  // Linked worktrees only (the main one is left out).
  int linked_worktrees() {
    std::istringstream lines(git({"worktree", "list", "--porcelain"}));
    int count = -1;
    for (std::string line; std::getline(lines, line);) count += starts_with(line, "worktree ");
    return count;
  }

 private:
  std::string dir_;
};

}  // namespace faultline::testing
