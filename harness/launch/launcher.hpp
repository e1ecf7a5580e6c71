// Launching the ranks of one trial: the interface every launcher (local, later Slurm) implements.
// No shell anywhere: argv vectors and explicit environments.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace faultline::harness {

class LogRecords;

// What a launcher that starts its own ranks (torchrun) sets in each rank's environment; it must
// not inherit them from the harness's, as the ranks below it are told apart by RANK.
inline constexpr const char* kLauncherSetsPerRank[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK"};

struct RankLaunch {
  int rank = 0;
  // argv[0] is the executable path. Empty: the rank has no process of its own; it runs in the
  // process of the launch before it (a launcher such as torchrun that starts its ranks).
  std::vector<std::string> argv;
  // A launcher process (ranks_from = "torchrun") that starts this many ranks on its node, its
  // argv holding node placeholders (node_placeholders.hpp); 0: the process is the rank itself.
  int starts_ranks = 0;
  std::map<std::string, std::string> env;  // added to the harness's own environment
  std::string log_path;                    // stdout and stderr of the rank
  std::string metrics_path;                // what FAULTLINE_METRICS is set to
  std::string stacks_path;                 // where its stacks go when asked; "": log_path
  std::string cwd;                         // "": the harness's own
  // A log-only trainer: its records are read from log_path with these patterns; null: from
  // metrics_path (the protocol).
  std::shared_ptr<const LogRecords> log_records;
};

enum class ExitKind { Running, Exited, Signaled };

struct RankStatus {
  ExitKind kind = ExitKind::Running;
  int exit_code = 0;  // when Exited
  int signal = 0;     // when Signaled
  bool killed_by_harness = false;
  // Ended by the scheduler (its time limit, a node failure), not by itself: the trial's
  // RunningTrial::scheduler_report() says why.
  bool ended_by_scheduler = false;
  std::chrono::steady_clock::time_point ended;
};

// Why a batch scheduler ended a trial's job or step (Slurm's job states).
enum class SchedulerEnd { TimeLimit, OutOfMemory, NodeFail, Cancelled, Other };

struct SchedulerReport {
  SchedulerEnd end = SchedulerEnd::Other;
  std::string node;    // the node it names, when it names one
  std::string detail;  // e.g. "job 42 TIMEOUT", Slurm's own words
};

// The running ranks of one trial.
class RunningTrial {
 public:
  virtual ~RunningTrial() = default;
  virtual int ranks() const = 0;
  // Non-blocking: refreshes and returns each rank's status.
  virtual std::vector<RankStatus> poll() = 0;
  // SIGTERM, a grace period, then SIGKILL to each rank's process group; reaps every process.
  virtual void kill_all(std::chrono::milliseconds grace) = 0;
  // Sends `signal` to every rank still running (e.g. SIGUSR1: print your stacks).
  virtual void signal_all(int signal) = 0;
  // Set once the scheduler ended the trial on its own; nullopt for a local trial.
  virtual std::optional<SchedulerReport> scheduler_report() const { return std::nullopt; }
  // Seconds between the launch and the first rank starting (a queued job's wait); 0 locally.
  virtual double queue_wait_s() const { return 0; }
  // Whether any rank has started: a queued job's wait is not the training's start-up, and no
  // time without a step record counts against it until then. Always true locally.
  virtual bool started() { return true; }
  // Set while the job waits in the queue for a reason that no wait resolves (the scheduler's
  // own words, e.g. Slurm's Reason=PartitionConfig): the trial is an infrastructure error.
  virtual std::optional<std::string> never_starts() const { return std::nullopt; }
  // The launcher's own output (srun's), where it keeps one: why no rank started, if none did.
  virtual std::string launcher_log_path() const { return ""; }
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual const char* name() const = 0;
  // Starts every rank; a rank that cannot be started at all is an InfraError.
  virtual std::unique_ptr<RunningTrial> launch(const std::vector<RankLaunch>& ranks) = 0;
  // How many nodes a trial of `ranks` ranks spans: a trainer that starts its own ranks gets one
  // launcher process per node (rank_launches' check_node_split says whether they split evenly).
  virtual int nodes_for(int ranks) const {
    (void)ranks;
    return 1;
  }
  // Another launcher like this one, for a trial run in another thread; nullptr: trials with
  // this launcher run one at a time.
  virtual std::unique_ptr<Launcher> clone() const { return nullptr; }
  // Where its trials run, as part of a trial's identity ("" for this machine): a trial placed on
  // other nodes is another trial, not one to reuse from the store.
  virtual std::string placement() const { return ""; }
  // The --set launcher.* keys it was made with, stored with each run so a replay of it is
  // placed as it was.
  virtual std::vector<std::string> sets() const { return {}; }
};

// The infrastructure could not run the trial (no executable, no port, fork failed): kept apart
// from a failing trial everywhere.
struct InfraError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Signal number → "SIGSEGV".
std::string signal_name(int signal);

}  // namespace faultline::harness
