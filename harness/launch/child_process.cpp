// The only place that uses Boost.Process, and only to start a child: waiting, killing and
// decoding the wait status are done here by hand, so a signal death is told apart from an exit
// code and a reaped child's group is never signalled.
#include "harness/launch/child_process.hpp"

#define BOOST_PROCESS_USE_STD_FS 1
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <cerrno>
#include <csignal>

namespace faultline::harness {

namespace bp = boost::process;

namespace {

std::string executable(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  auto found = bp::search_path(name);
  if (found.empty()) throw InfraError("cannot find '" + name + "' in PATH");
  return found.string();
}

template <typename... Output>
pid_t spawn(const ChildSpec& spec, std::error_code& error, Output&&... output) {
  bp::environment env = boost::this_process::environment();
  for (const auto& name : spec.unset_env) env.erase(name);
  for (const auto& [key, value] : spec.env) env[key] = value;
  const std::vector<std::string> args(spec.argv.begin() + 1, spec.argv.end());
  const std::string start_dir = spec.cwd.empty() ? "." : spec.cwd;
  bp::child child(
      bp::exe = executable(spec.argv.front()), bp::args = args, env, bp::start_dir = start_dir,
      std::forward<Output>(output)..., bp::std_in < bp::null, error,
      bp::extend::on_exec_setup = [](auto&) {
        // A group of its own, so killing the child also kills what it started.
        ::setpgid(0, 0);
        // A harness killed with SIGKILL cannot reap the child: the kernel kills it.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      });
  const pid_t pid = error ? -1 : child.id();
  child.detach();  // waited for and killed here, never by Boost
  return pid;
}

pid_t start(const ChildSpec& spec, std::error_code& error) {
  const bool to_null = spec.output_path.empty();
  if (!spec.error_path.empty()) {
    if (to_null) return spawn(spec, error, bp::std_out > bp::null, bp::std_err > spec.error_path);
    return spawn(spec, error, bp::std_out > spec.output_path, bp::std_err > spec.error_path);
  }
  if (to_null) return spawn(spec, error, (bp::std_out & bp::std_err) > bp::null);
  return spawn(spec, error, (bp::std_out & bp::std_err) > spec.output_path);
}

}  // namespace

ChildProcess::ChildProcess(const ChildSpec& spec) {
  if (spec.argv.empty()) throw InfraError("cannot start a command with an empty argv");
  std::error_code error;
  pid_ = start(spec, error);
  if (error || pid_ <= 0) {
    std::string where = spec.cwd.empty() ? "" : " (in " + spec.cwd + ")";
    throw InfraError("cannot start " + spec.argv.front() + where + ": " + error.message());
  }
}

ChildProcess::~ChildProcess() {
  if (!exit_) kill();
}

std::optional<ChildExit> ChildProcess::poll() {
  if (exit_) return exit_;
  // WNOWAIT: the child stays a zombie, so its group id cannot be reused before we kill it.
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
      info.si_pid != pid_)
    return std::nullopt;
  ::kill(-pid_, SIGKILL);  // whatever it left running in its group
  reap();
  return exit_;
}

bool ChildProcess::signal_group(int signal) {
  if (exit_) return false;
  return ::kill(-pid_, signal) == 0;
}

ChildExit ChildProcess::kill() {
  if (!exit_) {
    ::kill(-pid_, SIGKILL);
    reap();
  }
  return *exit_;
}

void ChildProcess::reap() {
  int raw = 0;
  pid_t reaped = -1;
  do {
    reaped = ::waitpid(pid_, &raw, 0);
  } while (reaped < 0 && errno == EINTR);
  ChildExit ended;
  ended.ended = std::chrono::steady_clock::now();
  if (reaped == pid_ && WIFSIGNALED(raw)) {
    ended.kind = ExitKind::Signaled;
    ended.signal = WTERMSIG(raw);
  } else {
    ended.exit_code = reaped == pid_ ? WEXITSTATUS(raw) : -1;  // -1: reaped by someone else
  }
  exit_ = ended;
}

}  // namespace faultline::harness
