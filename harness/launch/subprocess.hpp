// One child process run to completion, with a working directory, extra environment, a timeout
// and an output file: git, and the user's --build/--test commands of `bisect commits`.
#pragma once

#include <atomic>
#include <map>
#include <string>
#include <vector>

namespace faultline::harness {

struct CommandSpec {
  std::vector<std::string> argv;                   // argv[0]: a path, or a name looked up in PATH
  std::string cwd;                                 // "" : the harness's own
  std::map<std::string, std::string> env;          // added to the harness's environment
  std::string output_path;                         // stdout (and stderr) go here ("": discarded)
  std::string error_path;                          // "": stderr goes with stdout
  double timeout_s = 0;                            // 0: none
  const std::atomic<bool>* interrupted = nullptr;  // polled; set: the child is killed
};

enum class CommandEnd {
  Exited,       // exit_code is valid
  Signaled,     // signal is valid
  TimedOut,     // killed (SIGKILL to its process group) at the timeout
  Interrupted,  // killed because *interrupted became true
};

struct CommandResult {
  CommandEnd end = CommandEnd::Exited;
  int exit_code = 0;
  int signal = 0;
  double wall_s = 0;
};

// Runs the command in a process group of its own (a timeout kills whatever it started too); the
// child dies with the harness (PR_SET_PDEATHSIG). A command that cannot be started at all is an
// InfraError (harness/launcher.hpp).
CommandResult run_command(const CommandSpec& spec);

// A command's whole stdout and stderr, captured in temporary files (no pipes, so no deadlock on
// a large output) that are removed whatever happens: for git and Slurm's client commands.
struct CapturedCommand {
  CommandResult result;
  std::string out, err;
};
// Runs `spec` with its output_path and error_path replaced by the temporary files.
CapturedCommand run_captured(CommandSpec spec);

// "exit 1", "SIGSEGV", "timed out after 600 s", "interrupted".
std::string describe(const CommandResult& result, const CommandSpec& spec);

// The last `bytes` of a file, "" if it cannot be read.
std::string file_tail(const std::string& path, std::size_t bytes = 2000);

}  // namespace faultline::harness
