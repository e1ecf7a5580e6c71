// The only place that uses Boost.Process. Exit status is decoded from the raw wait status so a
// signal death is told apart from an exit code.
#include "harness/local_launcher.hpp"

#define BOOST_PROCESS_USE_STD_FS 1
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <csignal>
#include <cstring>
#include <thread>

namespace faultline::harness {

namespace bp = boost::process;

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
      auto env = boost::this_process::environment();
      bp::environment child_env = env;
      for (const auto& [key, value] : rank.env) child_env[key] = value;
      std::vector<std::string> args(rank.argv.begin() + 1, rank.argv.end());
      auto group = std::make_unique<bp::group>();
      std::error_code error;
      auto child = std::make_unique<bp::child>(
          bp::exe = rank.argv.at(0), bp::args = args, child_env,
          (bp::std_out & bp::std_err) > rank.log_path, bp::std_in < bp::null, *group, error,
          bp::extend::on_exec_setup = [](auto&) {
            // A harness killed with SIGKILL cannot reap its ranks: the kernel kills them.
            prctl(PR_SET_PDEATHSIG, SIGKILL);
          });
      if (error) {
        kill_all(std::chrono::milliseconds(0));
        throw InfraError("cannot start rank " + std::to_string(rank.rank) + " (" + rank.argv.at(0) +
                         "): " + error.message());
      }
      groups_.push_back(std::move(group));
      children_.push_back(std::move(child));
      status_.emplace_back();
    }
  }

  ~LocalTrial() override { kill_all(std::chrono::milliseconds(0)); }

  int ranks() const override { return static_cast<int>(children_.size()); }

  std::vector<RankStatus> poll() override {
    for (size_t i = 0; i < children_.size(); ++i) reap(i, WNOHANG);
    return status_;
  }

  void kill_all(std::chrono::milliseconds grace) override {
    bool any = false;
    for (size_t i = 0; i < children_.size(); ++i) {
      if (status_[i].kind != ExitKind::Running) continue;
      any = true;
      status_[i].killed_by_harness = true;
      ::kill(-groups_[i]->native_handle(), SIGTERM);
    }
    if (!any) return;
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (std::chrono::steady_clock::now() < deadline && running() > 0) {
      poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (size_t i = 0; i < children_.size(); ++i) {
      ::kill(-groups_[i]->native_handle(), SIGKILL);  // also whatever the rank left behind
      reap(i, 0);
    }
  }

 private:
  size_t running() const {
    size_t count = 0;
    for (const auto& status : status_) count += status.kind == ExitKind::Running;
    return count;
  }

  void reap(size_t i, int options) {
    if (status_[i].kind != ExitKind::Running) return;
    int raw = 0;
    pid_t pid = ::waitpid(children_[i]->id(), &raw, options);
    if (pid != children_[i]->id()) return;
    children_[i]->detach();  // reaped here: Boost must not wait for it again
    status_[i].ended = std::chrono::steady_clock::now();
    if (WIFSIGNALED(raw)) {
      status_[i].kind = ExitKind::Signaled;
      status_[i].signal = WTERMSIG(raw);
    } else {
      status_[i].kind = ExitKind::Exited;
      status_[i].exit_code = WEXITSTATUS(raw);
    }
  }

  std::vector<std::unique_ptr<bp::group>> groups_;
  std::vector<std::unique_ptr<bp::child>> children_;
  std::vector<RankStatus> status_;
};

}  // namespace

std::unique_ptr<RunningTrial> LocalLauncher::launch(const std::vector<RankLaunch>& ranks) {
  return std::make_unique<LocalTrial>(ranks);
}

}  // namespace faultline::harness
