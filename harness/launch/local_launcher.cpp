// The local launcher: each rank a ChildProcess (its own process group, stdout and stderr in its
// log), and the loopback port picker for MASTER_PORT.
#include "harness/launch/local_launcher.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <thread>

#include "harness/launch/child_process.hpp"
#include "harness/launch/node_placeholders.hpp"
#include "harness/launch/process_tree.hpp"

namespace faultline::harness {

std::string signal_name(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signal);
}

int pick_free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw InfraError("cannot create a socket to pick a port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    close(fd);
    throw InfraError("cannot bind a loopback port");
  }
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

namespace {

class LocalTrial : public RunningTrial {
 public:
  explicit LocalTrial(const std::vector<RankLaunch>& ranks) {
    for (const auto& rank : ranks) {
      status_.emplace_back();
      launchers_.push_back(rank.starts_ranks > 0);
      if (rank.argv.empty()) {  // runs inside the process of a launch before it
        children_.push_back(nullptr);
        continue;
      }
      ChildSpec spec;
      spec.argv = rank.starts_ranks > 0 ? fill_node_of(rank.argv, rank.env) : rank.argv;
      spec.env = rank.env;
      if (rank.starts_ranks > 0)
        spec.unset_env.assign(std::begin(kLauncherSetsPerRank), std::end(kLauncherSetsPerRank));
      spec.output_path = rank.log_path;
      spec.cwd = rank.cwd;
      try {
        children_.push_back(std::make_unique<ChildProcess>(spec));
      } catch (const InfraError& error) {
        kill_all(std::chrono::milliseconds(0));
        throw InfraError("cannot start rank " + std::to_string(rank.rank) + ": " + error.what());
      }
    }
  }

  ~LocalTrial() override { kill_all(std::chrono::milliseconds(0)); }

  int ranks() const override { return static_cast<int>(children_.size()); }

  std::vector<RankStatus> poll() override {
    for (size_t i = 0; i < children_.size(); ++i) {
      if (children_[i])
        record(i, children_[i]->poll());
      else if (i > 0)
        status_[i] = status_[i - 1];  // the rank lives and ends with its process
    }
    return status_;
  }

  void signal_all(int signal) override {
    for (size_t i = 0; i < children_.size(); ++i) {
      if (!children_[i] || status_[i].kind != ExitKind::Running) continue;
      if (is_launcher(i)) {
        // Its ranks, each in a session of its own under torchrun, which itself dies of a signal
        // it does not handle (SIGUSR1), as does a shell that wraps it: not its children, but
        // the processes below it that torchrun gave a RANK.
        const auto below = descendants(children_[i]->pid());
        seen_below_launchers_.insert(seen_below_launchers_.end(), below.begin(), below.end());
        signal_seen(outermost_setting(children_[i]->pid(), "RANK"), signal);
      } else
        children_[i]->signal_group(signal);
    }
  }

  void kill_all(std::chrono::milliseconds grace) override {
    bool any = false;
    // What a launcher started, seen while it still runs: ranks in sessions of their own
    // outlive their launcher's group, and once it is reaped they are below nothing of ours.
    // So is what was below them when they were signalled, should one have died of it.
    std::vector<SeenProcess> started_by_launchers = seen_below_launchers_;
    for (size_t i = 0; i < children_.size(); ++i) {
      if (status_[i].kind != ExitKind::Running) continue;
      status_[i].killed_by_harness = true;
      if (!children_[i]) continue;
      any = true;
      if (is_launcher(i))
        for (const auto& process : descendants(children_[i]->pid()))
          started_by_launchers.push_back(process);
      children_[i]->signal_group(SIGTERM);
    }
    if (!any) {
      signal_seen(started_by_launchers, SIGKILL);
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (std::chrono::steady_clock::now() < deadline && running() > 0) {
      poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // A rank seen ending was reaped after its group was killed; only the others are left.
    for (size_t i = 0; i < children_.size(); ++i)
      if (children_[i]) record(i, children_[i]->kill());
    signal_seen(started_by_launchers, SIGKILL);
    poll();
  }

 private:
  size_t running() const {
    size_t count = 0;
    for (const auto& status : status_) count += status.kind == ExitKind::Running;
    return count;
  }

  void record(size_t i, const std::optional<ChildExit>& exit) {
    if (!exit || status_[i].kind != ExitKind::Running) return;
    status_[i].kind = exit->kind;
    status_[i].exit_code = exit->exit_code;
    status_[i].signal = exit->signal;
    status_[i].ended = exit->ended;
  }

  bool is_launcher(size_t i) const { return launchers_[i]; }

  std::vector<std::unique_ptr<ChildProcess>> children_;
  std::vector<bool> launchers_;  // by rank: its process starts ranks itself (torchrun)
  std::vector<SeenProcess> seen_below_launchers_;  // by signal_all
  std::vector<RankStatus> status_;
};

}  // namespace

std::unique_ptr<RunningTrial> LocalLauncher::launch(const std::vector<RankLaunch>& ranks) {
  return std::make_unique<LocalTrial>(ranks);
}

}  // namespace faultline::harness
