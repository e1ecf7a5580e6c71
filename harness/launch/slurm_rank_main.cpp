// faultline-slurm-rank OUT_DIR [--node] -- ARGV...: one rank of a Slurm trial, or with --node
// one node's launcher that starts its ranks. srun starts it once per task; it maps Slurm's task
// environment onto the one every trainer speaks (RANK, WORLD_SIZE, LOCAL_RANK, NODE_RANK,
// MASTER_ADDR, FAULTLINE_HOST, this rank's FAULTLINE_METRICS), runs ARGV, and leaves how it
// started and ended in OUT_DIR (rank<N> or node<N> .started and .exit) for the launcher to
// poll: srun alone reports only the step, not which task died of what.
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "harness/launch/launcher.hpp"
#include "harness/launch/node_placeholders.hpp"
#include "harness/launch/process_tree.hpp"
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

// The processes the launcher left (its ranks, now this process's children): SIGTERM, up to 2 s
// to end (a rank writes its stacks and its end event), then SIGKILL; every one reaped.
void end_what_it_left() {
  using faultline::harness::descendants;
  using faultline::harness::signal_seen;
  auto left = descendants(getpid());
  if (left.empty()) return;
  signal_seen(left, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < deadline) {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (descendants(getpid()).empty()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  signal_seen(descendants(getpid()), SIGKILL);
  while (waitpid(-1, nullptr, 0) > 0) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  // A node's launcher (--node) starts that node's ranks itself: it is told the node's place,
  // and its ranks set their own RANK (and fill {rank} in FAULTLINE_METRICS).
  const bool node_task =
      argc >= 5 && std::string(argv[2]) == faultline::harness::slurm::kNodeTaskFlag;
  const int command_at = node_task ? 4 : 3;
  if (argc <= command_at || std::string(argv[command_at - 1]) != "--") {
    std::fprintf(stderr, "usage: faultline-slurm-rank OUT_DIR [--node] -- COMMAND [ARGS...]\n");
    return 2;
  }
  const std::string out_dir = argv[1];
  const std::string task = env("SLURM_PROCID");
  if (task.empty()) {
    std::fprintf(stderr, "faultline-slurm-rank: SLURM_PROCID is not set: run it under srun\n");
    return 2;
  }
  setenv("NODE_RANK", env("SLURM_NODEID").c_str(), 1);
  setenv("FAULTLINE_HOST", env("SLURMD_NODENAME").c_str(), 1);
  setenv("MASTER_ADDR", master_addr().c_str(), 1);
  std::vector<std::string> command(argv + command_at, argv + argc);
  if (node_task) {
    for (const char* name : faultline::harness::kLauncherSetsPerRank) unsetenv(name);
    command = faultline::harness::fill_node_of(
        command, {{"NODE_RANK", env("NODE_RANK")}, {"MASTER_ADDR", env("MASTER_ADDR")}});
  } else {
    setenv("RANK", task.c_str(), 1);
    setenv("WORLD_SIZE", env("SLURM_NTASKS").c_str(), 1);
    setenv("LOCAL_RANK", env("SLURM_LOCALID").c_str(), 1);
    replace_rank("FAULTLINE_METRICS", task);
    replace_rank("FAULTLINE_STACKS", task);
  }
  const std::string files = out_dir + "/" + (node_task ? "node" : "rank") + task;
  {
    const auto now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch());
    std::ofstream(files + ".started") << std::fixed << now.count() << "\n";
  }

  // A node's launcher may start its ranks in sessions of their own (torchrun 2.x) and die of a
  // signal it does not handle (SIGUSR1, the stack signal): its ranks then become this
  // process's children, not init's, and are ended with it below instead of left running.
  if (node_task) prctl(PR_SET_CHILD_SUBREAPER, 1);
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
    std::vector<char*> args;
    for (auto& word : command) args.push_back(word.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::perror(("faultline-slurm-rank: " + std::string(args[0])).c_str());
    _exit(127);
  }
  int status = 0;
  while (waitpid(g_child, &status, 0) < 0) {
  }
  if (node_task) end_what_it_left();
  // Written whole, then renamed: the launcher never reads half a line.
  const std::string exit_path = files + ".exit";
  std::ofstream(exit_path + ".tmp")
      << (WIFSIGNALED(status) ? faultline::harness::slurm::kSignaledWord
                              : faultline::harness::slurm::kExitedWord)
      << " " << (WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status)) << "\n";
  std::rename((exit_path + ".tmp").c_str(), exit_path.c_str());
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}
