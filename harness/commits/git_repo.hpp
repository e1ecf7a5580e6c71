// The user's git repository for `bisect commits`: revisions, the DAG between good and bad, and
// worktrees of single commits; git runs with argv vectors and the user's checkout is never touched.
#pragma once

#include <string>
#include <vector>

#include "bisect/commit_graph.hpp"

namespace faultline::harness {

class GitRepo {
 public:
  // `dir` is any directory inside a work tree; UserError if it is not one.
  static GitRepo open(const std::string& dir);

  const std::string& top() const { return top_; }  // the work tree's root, absolute

  // The full commit id of REV; UserError (naming `flag`) if REV names no commit.
  std::string resolve(const std::string& rev, const std::string& flag) const;
  bool is_ancestor(const std::string& ancestor, const std::string& descendant) const;
  // `git rev-list --parents BAD ^GOOD...`: newest first, what bisect::CommitBisect expects.
  std::vector<bisect::Commit> range(const std::string& bad,
                                    const std::vector<std::string>& goods) const;

  std::string subject(const std::string& commit) const;  // its message's first line
  std::vector<std::string> worktrees() const;  // paths of every linked worktree (git worktree list)

  // `git worktree add --detach PATH COMMIT`. A leftover worktree at PATH (a killed run) is
  // removed first.
  void add_worktree(const std::string& path, const std::string& commit) const;
  // `git worktree remove --force PATH`, then the directory itself if git left it.
  void remove_worktree(const std::string& path) const;

 private:
  explicit GitRepo(std::string top) : top_(std::move(top)) {}
  struct Output {
    int exit_code = 0;
    std::string out, err;
  };
  // Runs `git -C top ARGS`; InfraError if git cannot be started or dies of a signal.
  Output git(const std::vector<std::string>& args) const;
  std::string git_ok(const std::vector<std::string>& args) const;  // InfraError unless exit 0

  std::string top_;
};

}  // namespace faultline::harness
