// One child process in a process group of its own: the harness's only process runner, used by
// the local launcher (ranks) and run_command (git, --build/--test commands).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/launch/launcher.hpp"

namespace faultline::harness {

struct ChildSpec {
  std::vector<std::string> argv;           // argv[0]: a path, or a name looked up in PATH
  std::string cwd;                         // "": the harness's own
  std::map<std::string, std::string> env;  // added to the harness's environment
  // Opened by the harness: a relative path is relative to the harness's directory, not cwd.
  std::string output_path;             // stdout goes here; "": discarded
  std::string error_path;              // stderr goes here; "": with stdout
  std::vector<std::string> unset_env;  // taken out of the harness's environment
};

struct ChildExit {
  ExitKind kind = ExitKind::Exited;  // Exited or Signaled
  int exit_code = 0;                 // when Exited
  int signal = 0;                    // when Signaled
  std::chrono::steady_clock::time_point ended;
};

// The child's pid is its process group id. The child is reaped only after its exit has been
// seen with waitid(WNOWAIT) and its group killed while it is still a zombie: a zombie keeps the
// group id from being reused, so the group signalled is always the child's own. After the reap
// the group is never signalled again. The child dies with the harness (PR_SET_PDEATHSIG).
class ChildProcess {
 public:
  // A command that cannot be started at all (not found, not executable) is an InfraError.
  explicit ChildProcess(const ChildSpec& spec);
  ~ChildProcess();  // kills and reaps a child still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Non-blocking. Once the child has ended: kills what it left in its group, reaps it, and
  // returns how it ended (also on every later call).
  std::optional<ChildExit> poll();
  // Sends `signal` to the child's group; false (and nothing sent) once the child is reaped.
  bool signal_group(int signal);
  // SIGKILL to the group, then waits for the child. Returns how it ended.
  ChildExit kill();
  const std::optional<ChildExit>& exit() const { return exit_; }

 private:
  void reap();
  pid_t pid_ = -1;
  std::optional<ChildExit> exit_;
};

}  // namespace faultline::harness
