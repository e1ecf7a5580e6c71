// git through run_command: each call captures stdout and stderr in temporary files (no pipes, so
// no deadlock on a large `rev-list`), and git's own message is quoted in every error.
#include "harness/commits/git_repo.hpp"

#include <filesystem>
#include <sstream>

#include "common/error.hpp"
#include "common/text.hpp"
#include "harness/launch/launcher.hpp"
#include "harness/launch/subprocess.hpp"

namespace faultline::harness {

namespace fs = std::filesystem;

namespace {

// git's first message line ("fatal: not a git repository ...") for error texts.
std::string first_line(const std::string& text) {
  const std::string trimmed = trim(text);
  return trimmed.substr(0, trimmed.find('\n'));
}

}  // namespace

GitRepo::Output GitRepo::git(const std::vector<std::string>& args) const {
  CommandSpec spec;
  spec.argv = {"git", "-C", top_.empty() ? std::string(".") : top_};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  // Never open an editor or a pager, never ask for credentials.
  spec.env = {{"GIT_TERMINAL_PROMPT", "0"}, {"GIT_PAGER", "cat"}, {"GIT_EDITOR", "true"}};
  CapturedCommand captured = run_captured(spec);
  if (captured.result.end != CommandEnd::Exited)
    throw InfraError("git " + args.front() + " " + describe(captured.result, spec));
  return {captured.result.exit_code, std::move(captured.out), std::move(captured.err)};
}

std::string GitRepo::git_ok(const std::vector<std::string>& args) const {
  Output output = git(args);
  if (output.exit_code != 0) {
    std::string command = "git";
    for (const auto& arg : args) command += " " + arg;
    throw InfraError(command + " failed in " + top_ + ": " + first_line(output.err));
  }
  return output.out;
}

GitRepo GitRepo::open(const std::string& dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error))
    throw UserError("not a directory", dir, "give --repo a git work tree");
  GitRepo probe(fs::absolute(dir).string());
  Output output = probe.git({"rev-parse", "--show-toplevel"});
  if (output.exit_code != 0)
    throw UserError("not a git work tree: " + first_line(output.err), dir,
                    "give --repo a directory inside a git checkout (not a bare repository)");
  return GitRepo(trim(output.out));
}

std::string GitRepo::resolve(const std::string& rev, const std::string& flag) const {
  // A REV such as "--all" would be read as an option.
  const bool option_like = rev.empty() || rev.front() == '-';
  Output output = option_like ? Output{1, "", ""}
                              : git({"rev-parse", "--verify", "--quiet", rev + "^{commit}"});
  if (output.exit_code != 0 || trim(output.out).empty())
    throw UserError("unknown revision '" + rev + "'", flag + " in " + top_,
                    "give a commit, branch or tag that `git rev-parse` knows");
  return trim(output.out);
}

bool GitRepo::is_ancestor(const std::string& ancestor, const std::string& descendant) const {
  Output output = git({"merge-base", "--is-ancestor", ancestor, descendant});
  if (output.exit_code > 1)
    throw InfraError("git merge-base --is-ancestor failed: " + first_line(output.err));
  return output.exit_code == 0;
}

std::vector<bisect::Commit> GitRepo::range(const std::string& bad,
                                           const std::vector<std::string>& goods) const {
  std::vector<std::string> args = {"rev-list", "--parents", bad};
  for (const auto& good : goods) args.push_back("^" + good);
  std::istringstream lines(git_ok(args));
  std::vector<bisect::Commit> commits;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    bisect::Commit commit;
    if (!(words >> commit.id)) continue;
    for (std::string parent; words >> parent;) commit.parents.push_back(parent);
    commits.push_back(std::move(commit));
  }
  return commits;
}

std::string GitRepo::subject(const std::string& commit) const {
  return trim(git_ok({"log", "-1", "--format=%s", commit}));
}

std::vector<std::string> GitRepo::worktrees() const {
  std::istringstream lines(git_ok({"worktree", "list", "--porcelain"}));
  std::vector<std::string> paths;
  const std::string prefix = "worktree ";
  for (std::string line; std::getline(lines, line);)
    if (line.compare(0, prefix.size(), prefix) == 0) paths.push_back(line.substr(prefix.size()));
  if (!paths.empty()) paths.erase(paths.begin());  // the first one is the main work tree
  return paths;
}

void GitRepo::add_worktree(const std::string& path, const std::string& commit) const {
  std::error_code error;
  if (fs::exists(path, error)) remove_worktree(path);
  git({"worktree", "prune"});  // forget worktrees whose directories are gone
  fs::create_directories(fs::path(path).parent_path());
  git_ok({"worktree", "add", "--detach", "--force", path, commit});
}

void GitRepo::remove_worktree(const std::string& path) const {
  git({"worktree", "remove", "--force", "--force", path});  // twice: even a locked one
  std::error_code error;
  fs::remove_all(path, error);
  git({"worktree", "prune"});
}

}  // namespace faultline::harness
