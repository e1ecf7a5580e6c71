// Boost.Process for single commands run to completion. The wait status is decoded by hand (as in
// local_launcher.cpp) so that a signal death is told apart from an exit code.
#include "harness/subprocess.hpp"

#define BOOST_PROCESS_USE_STD_FS 1
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include "harness/launcher.hpp"

namespace faultline::harness {

namespace bp = boost::process;

namespace {

std::string executable(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  auto found = bp::search_path(name);
  if (found.empty()) throw InfraError("cannot find '" + name + "' in PATH");
  return found.string();
}

template <typename... Extra>
std::unique_ptr<bp::child> start(const CommandSpec& spec, bp::group& group, std::error_code& error,
                                 Extra&&... output) {
  bp::environment env = boost::this_process::environment();
  for (const auto& [key, value] : spec.env) env[key] = value;
  const std::vector<std::string> args(spec.argv.begin() + 1, spec.argv.end());
  const std::string start_dir = spec.cwd.empty() ? "." : spec.cwd;
  return std::make_unique<bp::child>(
      bp::exe = executable(spec.argv.at(0)), bp::args = args, env, bp::start_dir = start_dir,
      std::forward<Extra>(output)..., bp::std_in < bp::null, group, error,
      bp::extend::on_exec_setup = [](auto&) {
        // A harness killed with SIGKILL cannot reap the command: the kernel kills it.
        prctl(PR_SET_PDEATHSIG, SIGKILL);
      });
}

}  // namespace

CommandResult run_command(const CommandSpec& spec) {
  if (spec.argv.empty()) throw InfraError("run_command: empty argv");
  const auto started = std::chrono::steady_clock::now();
  bp::group group;
  std::error_code error;
  std::unique_ptr<bp::child> child;
  if (!spec.error_path.empty())
    child =
        start(spec, group, error, bp::std_out > spec.output_path, bp::std_err > spec.error_path);
  else if (spec.output_path.empty())
    child = start(spec, group, error, (bp::std_out & bp::std_err) > bp::null);
  else
    child = start(spec, group, error, (bp::std_out & bp::std_err) > spec.output_path);
  if (error)
    throw InfraError("cannot start " + spec.argv.front() + " (in " + spec.cwd +
                     "): " + error.message());

  CommandResult result;
  auto pause = std::chrono::milliseconds(1);
  const pid_t pid = child->id();
  while (true) {
    // WNOWAIT: the child stays a zombie, so its group id cannot be reused before we kill it.
    siginfo_t info{};
    const bool ended =
        ::waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const bool timed_out = !ended && spec.timeout_s > 0 && elapsed > spec.timeout_s;
    const bool interrupted = !ended && spec.interrupted && spec.interrupted->load();
    if (ended || timed_out || interrupted) {
      ::kill(-group.native_handle(), SIGKILL);  // also whatever it left running in its group
      int raw = 0;
      ::waitpid(pid, &raw, 0);
      child->detach();  // reaped here: Boost must not wait for it again
      group.detach();
      if (timed_out) {
        result.end = CommandEnd::TimedOut;
      } else if (interrupted) {
        result.end = CommandEnd::Interrupted;
      } else if (WIFSIGNALED(raw)) {
        result.end = CommandEnd::Signaled;
        result.signal = WTERMSIG(raw);
      } else {
        result.exit_code = WEXITSTATUS(raw);
      }
      break;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

std::string describe(const CommandResult& result, const CommandSpec& spec) {
  switch (result.end) {
    case CommandEnd::Exited:
      return "exit " + std::to_string(result.exit_code);
    case CommandEnd::Signaled:
      return "killed by " + signal_name(result.signal);
    case CommandEnd::TimedOut: {
      std::ostringstream text;
      text << "timed out after " << spec.timeout_s << " s";
      return text.str();
    }
    case CommandEnd::Interrupted:
      return "interrupted";
  }
  return "?";
}

std::string file_tail(const std::string& path, std::size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.size() > bytes ? text.substr(text.size() - bytes) : text;
}

}  // namespace faultline::harness
