// Test support: run a real child process (argv, extra environment), wait with a timeout, and
// capture its exit status and output. Tests use this instead of a shell.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace faultline::testing {

struct ProcessResult {
  int exit_code = -1;  // valid when !signaled
  int signal = 0;      // the terminating signal, or 0
  bool timed_out = false;
  std::string output;  // stdout and stderr, interleaved
};

struct ProcessSpec {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // added to the inherited environment
  double timeout_s = 120;
  // Polled every 20 ms while the child runs: true kills its process group with SIGKILL, as a
  // crashing machine or an impatient user would (ProcessResult.signal says SIGKILL).
  std::function<bool()> kill_when;
  // Polled likewise: a signal number sends that signal to its process group, 0 sends nothing
  // (e.g. SIGUSR1 then SIGTERM, as a job's time limit signals a job's tasks).
  std::function<int()> signal_when;
};

// Starts every spec at once (ranks of one run), waits for all, kills stragglers at the timeout.
std::vector<ProcessResult> run_processes(const std::vector<ProcessSpec>& specs);
ProcessResult run_process(const ProcessSpec& spec);

// A fresh directory under the test temp dir, removed with everything in it when the test
// program exits (kept with FAULTLINE_KEEP_TEST_DIRS=1).
std::string make_temp_dir(const std::string& tag);

// The whole file, or "" when it cannot be read (yet).
std::string read_text(const std::string& path);

// A TCP port that was free a moment ago.
int free_port();

// Where a process is looked for a marker: its command line, or its environment (a rank that a
// launcher started names its run's folder only in FAULTLINE_METRICS).
enum class ProcessText { CommandLine, Environment };

// Live processes whose command line (or environment) mentions `marker` (e.g. a test's unique
// directory).
int processes_mentioning(const std::string& marker,
                         ProcessText where = ProcessText::CommandLine);

}  // namespace faultline::testing
