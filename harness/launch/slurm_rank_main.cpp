// faultline-slurm-rank OUT_DIR -- ARGV...: one rank of a Slurm trial. srun starts it once per
// task; it maps Slurm's task environment onto the one every trainer speaks (RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, FAULTLINE_HOST, this rank's FAULTLINE_METRICS), runs ARGV, and leaves
// how it started and ended in OUT_DIR (rank<N>.started, rank<N>.exit) for the launcher to poll:
// srun alone reports only the step, not which task died of what.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "harness/launch/launcher.hpp"
#include "harness/launch/slurm_commands.hpp"

namespace {

pid_t g_child = -1;

void forward(int signal) {
  if (g_child > 0) kill(g_child, signal);
}

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

void replace_rank(const char* name, const std::string& rank) {
  std::string value = env(name);
  if (auto at = value.find("{rank}"); at != std::string::npos) {
    value.replace(at, 6, rank);
    setenv(name, value.c_str(), 1);
  }
}

// The address of the step's first node: its NodeAddr (a node name need not resolve).
std::string master_addr() {
  std::string list = env("SLURM_STEP_NODELIST");
  if (list.empty()) list = env("SLURM_JOB_NODELIST");
  const std::string first = faultline::harness::slurm::first_host(list);
  try {
    const auto node = faultline::harness::slurm::show("node", first);
    if (auto it = node.find("NodeAddr"); it != node.end() && !it->second.empty()) return it->second;
  } catch (const faultline::harness::InfraError&) {
  }
  return first;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || std::string(argv[2]) != "--") {
    std::fprintf(stderr, "usage: faultline-slurm-rank OUT_DIR -- COMMAND [ARGS...]\n");
    return 2;
  }
  const std::string out_dir = argv[1];
  const std::string rank = env("SLURM_PROCID");
  if (rank.empty()) {
    std::fprintf(stderr, "faultline-slurm-rank: SLURM_PROCID is not set: run it under srun\n");
    return 2;
  }
  setenv("RANK", rank.c_str(), 1);
  setenv("WORLD_SIZE", env("SLURM_NTASKS").c_str(), 1);
  setenv("LOCAL_RANK", env("SLURM_LOCALID").c_str(), 1);
  setenv("NODE_RANK", env("SLURM_NODEID").c_str(), 1);
  setenv("FAULTLINE_HOST", env("SLURMD_NODENAME").c_str(), 1);
  setenv("MASTER_ADDR", master_addr().c_str(), 1);
  replace_rank("FAULTLINE_METRICS", rank);
  replace_rank("FAULTLINE_STACKS", rank);
  {
    const auto now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch());
    std::ofstream(out_dir + "/rank" + rank + ".started") << std::fixed << now.count() << "\n";
  }

  for (int signal : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGCONT})
    std::signal(signal, forward);
  g_child = fork();
  if (g_child < 0) {
    std::perror("faultline-slurm-rank: fork");
    return 1;
  }
  if (g_child == 0) {
    for (int signal : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGCONT})
      std::signal(signal, SIG_DFL);
    std::vector<char*> args(argv + 3, argv + argc);
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::perror(("faultline-slurm-rank: " + std::string(args[0])).c_str());
    _exit(127);
  }
  int status = 0;
  while (waitpid(g_child, &status, 0) < 0) {
  }
  // Written whole, then renamed: the launcher never reads half a line.
  const std::string exit_path = out_dir + "/rank" + rank + ".exit";
  std::ofstream(exit_path + ".tmp")
      << (WIFSIGNALED(status) ? faultline::harness::slurm::kSignaledWord
                              : faultline::harness::slurm::kExitedWord)
      << " " << (WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status)) << "\n";
  std::rename((exit_path + ".tmp").c_str(), exit_path.c_str());
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}
