// Slurm client commands through run_captured: output to private temporary files, read back.
#include "harness/launch/slurm_commands.hpp"

#include <set>
#include <sstream>

#include "harness/launch/launcher.hpp"
#include "harness/launch/subprocess.hpp"

namespace faultline::harness::slurm {

std::string query(const std::vector<std::string>& argv,
                  const std::map<std::string, std::string>& env, double timeout_s) {
  CommandSpec spec;
  spec.argv = argv;
  spec.env = env;
  spec.timeout_s = timeout_s;
  CapturedCommand captured;
  try {
    captured = run_captured(spec);
  } catch (const InfraError& error) {
    throw InfraError(argv.at(0) + " cannot be run (is Slurm's client installed?): " + error.what());
  }
  const CommandResult& result = captured.result;
  if (result.end != CommandEnd::Exited || result.exit_code != 0) {
    std::string line;
    for (const auto& arg : argv) line += (line.empty() ? "" : " ") + arg;
    const std::string& err = captured.err;
    throw InfraError(line + ": " + describe(result, spec) + (err.empty() ? "" : ": " + err));
  }
  return captured.out;
}

std::map<std::string, std::string> show(const std::string& kind, const std::string& id) {
  std::string out;
  try {
    out = query({"scontrol", "show", kind, "-o", id});
  } catch (const InfraError& error) {
    // A job slurmctld has forgotten (past MinJobAge) is not an error: it is simply gone.
    if (std::string(error.what()).find("Invalid job id") != std::string::npos) return {};
    throw;
  }
  std::map<std::string, std::string> fields;
  std::istringstream words(out);
  std::string word;
  while (words >> word)
    if (auto eq = word.find('='); eq != std::string::npos)
      fields.emplace(word.substr(0, eq), word.substr(eq + 1));
  return fields;
}

std::string first_host(const std::string& hostlist) {
  const auto bracket = hostlist.find('[');
  const auto comma = hostlist.find(',');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket))
    return hostlist.substr(0, comma);
  const auto end = hostlist.find_first_of("-,]", bracket + 1);
  const auto close = hostlist.find(']', bracket);
  std::string suffix;  // "rack[2-3]-node7": what follows the brackets, up to the next host
  if (close != std::string::npos)
    suffix = hostlist.substr(close + 1, hostlist.find_first_of(",[", close + 1) - close - 1);
  return hostlist.substr(0, bracket) + hostlist.substr(bracket + 1, end - bracket - 1) + suffix;
}

// What the job's state says about its end; nullopt for an ordinary exit.
std::optional<SchedulerReport> end_of_job(const std::string& state, const std::string& job,
                                          const std::string& nodes, const std::string& reason) {
  const std::string detail = "Slurm job " + job + " ended " + state +
                             (reason.empty() || reason == "None" ? "" : " (" + reason + ")");
  if (state == "TIMEOUT" || state == "DEADLINE")
    return SchedulerReport{SchedulerEnd::TimeLimit, "", detail};
  if (state == "OUT_OF_MEMORY") return SchedulerReport{SchedulerEnd::OutOfMemory, "", detail};
  if (state == "NODE_FAIL" || state == "BOOT_FAIL")
    return SchedulerReport{SchedulerEnd::NodeFail, nodes, detail + " on node(s) " + nodes};
  if (state == "CANCELLED" || state == "PREEMPTED")
    return SchedulerReport{SchedulerEnd::Cancelled, "", detail};
  return std::nullopt;
}

// srun's own words about a step it lost (slurmstepd prints "*** STEP 5.0 ON n1 CANCELLED AT
// ... DUE TO TIME LIMIT ***").
std::optional<SchedulerReport> end_in_step_output(const std::string& log) {
  auto on_node = [&](size_t at) {
    auto on = log.rfind(" ON ", at);
    if (on == std::string::npos) return std::string();
    return log.substr(on + 4, log.find(' ', on + 4) - on - 4);
  };
  if (auto at = log.find("DUE TO TIME LIMIT"); at != std::string::npos)
    return SchedulerReport{SchedulerEnd::TimeLimit, on_node(at),
                           "Slurm ended the job at its time limit"};
  if (auto at = log.find("DUE TO NODE FAILURE"); at != std::string::npos)
    return SchedulerReport{SchedulerEnd::NodeFail, on_node(at),
                           "Slurm reported a node failure on " + on_node(at)};
  if (log.find("Out Of Memory") != std::string::npos || log.find("oom-kill") != std::string::npos)
    return SchedulerReport{SchedulerEnd::OutOfMemory, "", "Slurm reported an out-of-memory kill"};
  if (auto at = log.find(" CANCELLED AT "); at != std::string::npos)
    return SchedulerReport{SchedulerEnd::Cancelled, on_node(at), "the Slurm job was cancelled"};
  return std::nullopt;
}

bool is_final_state(const std::string& state) {
  return state != "PENDING" && state != "RUNNING" && state != "COMPLETING" &&
         state != "CONFIGURING" && state != "SUSPENDED" && state != "REQUEUED" &&
         state != "RESIZING" && state != "SIGNALING" && state != "STAGE_OUT" && !state.empty();
}

bool reason_never_resolves(const std::string& reason) {
  static const std::set<std::string> never = {
      "PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit",      "BadConstraints",
      "InvalidAccount",  "InvalidQOS",         "DependencyNeverSatisfied"};
  return never.count(reason) > 0;
}

}  // namespace faultline::harness::slurm
