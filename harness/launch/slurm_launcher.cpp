// The Slurm launcher. One srun command line serves both ways of running: directly as a child
// (a step of the current allocation) or as the body of an sbatch script. Rank statuses come
// from the files faultline-slurm-rank leaves; the job's or step's end from Slurm.
#include "harness/launch/slurm_launcher.hpp"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/resources.hpp"
#include "common/text.hpp"
#include "harness/launch/child_process.hpp"
#include "harness/launch/slurm_commands.hpp"
#include "harness/launch/subprocess.hpp"

namespace faultline::harness {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// Keys every rank gets from faultline-slurm-rank instead of from the harness.
const char* const kPerRankKeys[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                    "FAULTLINE_HOST"};

std::string rank_wrapper() {
  if (const char* given = std::getenv("FAULTLINE_SLURM_RANK"); given && *given) return given;
  const auto beside = executable_dir() / "faultline-slurm-rank";
  if (access(beside.c_str(), X_OK) != 0)
    throw InfraError("cannot find faultline-slurm-rank beside " + executable_dir().string() +
                     " (set FAULTLINE_SLURM_RANK)");
  return beside.string();
}

// The nodes of a trial's step: launcher.nodes, or as many as tasks_per_node needs; at least
// one, never more than its ranks.
int node_count(const SlurmOptions& options, int ranks) {
  int nodes = options.nodes;
  if (options.tasks_per_node > 0)
    nodes = (ranks + options.tasks_per_node - 1) / options.tasks_per_node;
  if (nodes <= 0) nodes = 1;
  return std::max(1, std::min(nodes, ranks));
}

// The shape of the step: --ntasks, --nodes, --ntasks-per-node.
std::vector<std::string> shape(const SlurmOptions& options, int ranks) {
  const int nodes = node_count(options, ranks);
  const int per_node = (ranks + nodes - 1) / nodes;
  return {"--ntasks=" + std::to_string(ranks), "--nodes=" + std::to_string(nodes),
          "--ntasks-per-node=" + std::to_string(per_node)};
}

std::vector<std::string> placement(const SlurmOptions& options) {
  std::vector<std::string> args;
  if (!options.time_limit.empty()) args.push_back("--time=" + options.time_limit);
  if (!options.partition.empty()) args.push_back("--partition=" + options.partition);
  if (!options.account.empty()) args.push_back("--account=" + options.account);
  if (!options.nodelist.empty()) args.push_back("--nodelist=" + options.nodelist);
  if (!options.exclude.empty()) args.push_back("--exclude=" + options.exclude);
  return args;
}

std::optional<RankStatus> read_exit(const std::string& path) {
  std::ifstream in(path);
  std::string how;
  int value = 0;
  if (!(in >> how >> value)) return std::nullopt;
  RankStatus status;
  status.kind = how == slurm::kSignaledWord ? ExitKind::Signaled : ExitKind::Exited;
  (status.kind == ExitKind::Signaled ? status.signal : status.exit_code) = value;
  status.ended = Clock::now();
  return status;
}

class SlurmTrial : public RunningTrial {
 public:
  SlurmTrial(const SlurmOptions& options, const std::vector<RankLaunch>& ranks) {
    launched_ = std::chrono::system_clock::now();
    if (ranks.empty()) throw InfraError("a Slurm trial needs at least one rank");
    out_dir_ = fs::path(ranks[0].metrics_path).parent_path().string();
    // One task per rank, or (a trainer that starts its own ranks) one launcher task per node.
    ranks_per_task_ = std::max(1, ranks[0].starts_ranks);
    const bool node_tasks = ranks[0].starts_ranks > 0;
    task_word_ = node_tasks ? "node" : "rank";
    for (const auto& rank : ranks) {
      const bool starts_task = rank.rank % ranks_per_task_ == 0;
      if (starts_task != !rank.argv.empty() || (starts_task && rank.argv != ranks[0].argv))
        throw InfraError(
            "the slurm launcher starts the same command in each task: one per rank, or one "
            "launcher per node that starts as many ranks on each");
      const std::string log = task_file(rank.rank / ranks_per_task_, ".log");
      if (rank.metrics_path != metrics_path(rank.rank) || rank.log_path != log)
        throw InfraError("the slurm launcher needs each rank's files in " + out_dir_ +
                         " named by its rank or node (metrics.rank<N>.jsonl, " +
                         (node_tasks ? "node<N>.log)" : "rank<N>.log)"));
      status_.emplace_back();
    }
    tasks_ = static_cast<int>(ranks.size()) / ranks_per_task_;
    name_ = "faultline-" + fs::path(out_dir_).filename().string();
    std::map<std::string, std::string> env = ranks[0].env;
    for (const char* key : kPerRankKeys) env.erase(key);
    env.erase("NODE_RANK");
    env["FAULTLINE_METRICS"] = out_dir_ + "/metrics.rank{rank}.jsonl";

    std::vector<std::string> srun = {"srun", "--job-name=" + name_, "--kill-on-bad-exit=0",
                                     "--output=" + out_dir_ + "/" + task_word_ + "%t.log"};
    // Ranks given hosts (FAULTLINE_HOST, `--hosts`: node names here) run on those nodes, each
    // on its own (Slurm's arbitrary distribution); the others wherever Slurm puts them.
    // A trial placed on its ranks' hosts takes no --nodelist of the recipe's.
    SlurmOptions where = options;
    const bool on_hosts = placed_on_hosts(ranks, env);
    if (on_hosts) where.nodelist.clear();
    const auto step_shape =
        on_hosts ? std::vector<std::string>{"--distribution=arbitrary",
                                            "--ntasks=" + std::to_string(ranks.size()),
                                            "--nodelist=" + env["SLURM_HOSTFILE"]}
        // A node's launcher gets a CPU for each rank it starts, as a task per rank would.
        : node_tasks
            ? std::vector<std::string>{"--ntasks=" + std::to_string(tasks_),
                                       "--nodes=" + std::to_string(tasks_), "--ntasks-per-node=1",
                                       "--cpus-per-task=" + std::to_string(ranks_per_task_)}
            : shape(options, static_cast<int>(ranks.size()));
    for (const auto& arg : step_shape) srun.push_back(arg);
    if (!ranks[0].cwd.empty()) srun.push_back("--chdir=" + ranks[0].cwd);
    const char* in_job = std::getenv("SLURM_JOB_ID");
    step_mode_ = in_job && *in_job;
    if (step_mode_) {
      job_ = in_job;
      for (auto& arg : placement(where)) srun.push_back(arg);
      srun.push_back("--exact");
    }
    for (const auto& arg : options.srun_args) srun.push_back(arg);
    srun.push_back(rank_wrapper());
    srun.push_back(out_dir_);
    if (node_tasks) srun.push_back(slurm::kNodeTaskFlag);
    srun.push_back("--");
    for (const auto& arg : ranks[0].argv) srun.push_back(arg);

    if (step_mode_) {
      srun_ =
          std::make_unique<ChildProcess>(ChildSpec{srun, "", env, out_dir_ + "/srun.log", "", {}});
      return;
    }
    const std::string script = out_dir_ + "/job.sh";
    {
      std::ofstream out(script);
      out << "#!/bin/sh\n# The Slurm job of one faultline trial: one step, its ranks.\nexec";
      for (const auto& word : srun) out << " " << shell_word(word);
      out << "\n";
    }
    std::vector<std::string> sbatch = {"sbatch", "--parsable", "--job-name=" + name_,
                                       "--output=" + out_dir_ + "/srun.log"};
    for (const auto& arg : step_shape) sbatch.push_back(arg);
    for (auto& arg : placement(where)) sbatch.push_back(arg);
    sbatch.push_back(script);
    std::string answer = slurm::query(sbatch, env);
    job_ = answer.substr(0, answer.find_first_of(";\n"));
    if (job_.empty()) throw InfraError("sbatch answered no job id: " + answer);
  }

  ~SlurmTrial() override { kill_all(std::chrono::milliseconds(0)); }

  int ranks() const override { return static_cast<int>(status_.size()); }

  std::vector<RankStatus> poll() override {
    for (int task = 0; task < tasks_; ++task) {
      // A task's first rank holds its status; the others live and end with it.
      auto& status = status_[static_cast<size_t>(task * ranks_per_task_)];
      if (status.kind != ExitKind::Running) continue;
      auto exit = read_exit(task_file(task, ".exit"));
      if (!exit) continue;
      exit->killed_by_harness = status.killed_by_harness;
      if (exit->kind == ExitKind::Signaled && !exit->killed_by_harness &&
          (exit->signal == SIGTERM || exit->signal == SIGKILL) && !held_out(*exit))
        continue;
      for (int i = 0; i < ranks_per_task_; ++i)
        status_[static_cast<size_t>(task * ranks_per_task_ + i)] = *exit;
    }
    if (!ended_ && job_over()) {
      ended_ = true;
      // Ranks the scheduler took down wrote no exit file: the job's state says why.
      for (auto& status : status_) {
        if (status.kind != ExitKind::Running) continue;
        status.kind = ExitKind::Signaled;
        status.signal = SIGKILL;
        status.ended = Clock::now();
        status.ended_by_scheduler = !status.killed_by_harness;
      }
    }
    return status_;
  }

  void signal_all(int signal) override {
    if (ended_) return;
    if (step_mode_) {
      srun_->signal_group(signal);  // srun forwards it to every task
      return;
    }
    try {
      slurm::query({"scancel", "--signal=" + std::to_string(signal), job_});
    } catch (const InfraError&) {
    }
  }

  // Ranks still running are cancelled (scancel); then waits until srun is gone or squeue no
  // longer lists the job: nothing of the trial is left queued or running.
  void kill_all(std::chrono::milliseconds grace) override {
    if (ended_) return;
    // What Slurm says about a job faultline cancels itself is not the scheduler's doing.
    const bool reported_before = report_.has_value();
    bool any_running = false;
    for (auto& status : status_)
      if (status.kind == ExitKind::Running) any_running = status.killed_by_harness = true;
    // A job whose ranks all ended is left to end by itself for a while before it is cancelled.
    const auto deadline = Clock::now() + grace + std::chrono::seconds(any_running ? 0 : 10);
    if (step_mode_) {
      if (any_running) srun_->signal_group(SIGTERM);  // srun forwards it and ends the step
      while (Clock::now() < deadline && !srun_->poll())
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (!srun_->poll()) {
        cancel_step();
        srun_->kill();
      }
    } else {
      if (any_running) cancel_job();
      while (Clock::now() < deadline && !gone_from_squeue())
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (!any_running) cancel_job();
      // Slurm's KillWait, then SIGKILL to what is left: bounded here.
      const auto hard_deadline = Clock::now() + std::chrono::seconds(60);
      while (Clock::now() < hard_deadline && !gone_from_squeue())
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    poll();
    ended_ = true;
    if (!reported_before) report_.reset();
  }

  std::optional<SchedulerReport> scheduler_report() const override { return report_; }

  bool started() override {
    for (int task = 0; !started_ && task < tasks_; ++task)
      started_ = std::filesystem::exists(task_file(task, ".started"));
    return started_;
  }

  std::string launcher_log_path() const override { return out_dir_ + "/srun.log"; }

  std::optional<std::string> never_starts() const override {
    if (started_ || state_ != "PENDING" || !slurm::reason_never_resolves(reason_))
      return std::nullopt;
    return "Slurm job " + job_ + " can never start: it is pending with Reason=" + reason_ +
           ", which no wait resolves (the partition cannot hold it as asked, an account or QOS "
           "is invalid, or a dependency can never be met); check launcher.nodes, "
           "launcher.tasks_per_node, launcher.partition and launcher.account against `sinfo` "
           "and `scontrol show partition`";
  }

  double queue_wait_s() const override {
    double first = 0;
    for (int task = 0; task < tasks_; ++task) {
      std::ifstream in(task_file(task, ".started"));
      double at = 0;
      if (in >> at && (first == 0 || at < first)) first = at;
    }
    if (first == 0) return 0;
    return std::max(0.0,
                    first - std::chrono::duration<double>(launched_.time_since_epoch()).count());
  }

 private:
  // With a host for every rank: writes the host file (one line per rank) and names it in
  // SLURM_HOSTFILE; true when the ranks are placed so.
  bool placed_on_hosts(const std::vector<RankLaunch>& ranks,
                       std::map<std::string, std::string>& env) {
    std::string lines;
    for (const auto& rank : ranks) {
      auto host = rank.env.find("FAULTLINE_HOST");
      if (host == rank.env.end() || host->second.empty()) return false;
      lines += host->second + "\n";
    }
    const std::string path = out_dir_ + "/hostfile";
    std::ofstream(path) << lines;
    env["SLURM_HOSTFILE"] = path;
    return true;
  }

  std::string metrics_path(int rank) const {
    return out_dir_ + "/metrics.rank" + std::to_string(rank) + ".jsonl";
  }
  // What faultline-slurm-rank leaves for task `task`: rank<N> or node<N> with `suffix`.
  std::string task_file(int task, const char* suffix) const {
    return out_dir_ + "/" + task_word_ + std::to_string(task) + suffix;
  }

  // A rank killed by SIGTERM or SIGKILL may be Slurm ending the job (its time limit, a node
  // failure, a cancel), which slurmstepd says in srun's output as it starts killing: such a
  // death is held back (false) until that line or the job's end tells, at most 5 s; then it is
  // the scheduler's (ended_by_scheduler) or the rank's own crash.
  bool held_out(RankStatus& exit) {
    if (!report_) report_ = slurm::end_in_step_output(file_tail(out_dir_ + "/srun.log", 20000));
    if (!held_since_) held_since_ = Clock::now();
    if (!report_ && !ended_ && Clock::now() - *held_since_ < std::chrono::seconds(5)) return false;
    exit.ended_by_scheduler = report_.has_value();
    return true;
  }

  // Whether the step or job has ended; sets report_ when the scheduler ended it.
  bool job_over() {
    if (step_mode_) {
      if (!srun_->poll()) return false;
      if (!report_) report_ = slurm::end_in_step_output(file_tail(out_dir_ + "/srun.log", 20000));
      return true;
    }
    // scontrol costs a round trip to slurmctld: at most once a second.
    if (Clock::now() - last_query_ < std::chrono::seconds(1)) return false;
    last_query_ = Clock::now();
    std::map<std::string, std::string> job;
    try {
      job = slurm::show("job", job_);
    } catch (const InfraError&) {
      return false;  // slurmctld busy: asked again next time
    }
    const std::string state = job.count("JobState") ? job["JobState"] : "";
    state_ = state;
    reason_ = job.count("Reason") ? job["Reason"] : "";
    if (!job.empty() && !slurm::is_final_state(state)) return false;
    bool all_exited = true;
    for (auto& status : status_) all_exited = all_exited && status.kind != ExitKind::Running;
    if (!all_exited || report_)
      if (auto report = slurm::end_of_job(state, job_, job["NodeList"], job["Reason"]))
        report_ = report;
    return true;
  }

  void cancel_job() {
    try {
      slurm::query({"scancel", job_});
    } catch (const InfraError&) {
    }
  }

  bool gone_from_squeue() {
    try {
      return slurm::query({"squeue", "-h", "-j", job_, "-o", "%T"}).find_first_not_of(" \n") ==
             std::string::npos;
    } catch (const InfraError&) {
      return true;  // squeue refuses a job id it no longer knows
    }
  }

  void cancel_step() {
    try {
      std::istringstream steps(slurm::query({"squeue", "-h", "-s", "-j", job_, "-o", "%i %j"}));
      for (std::string id, name; steps >> id >> name;)
        if (name == name_) slurm::query({"scancel", id});
    } catch (const InfraError&) {
    }
  }

  std::string out_dir_, name_, job_;
  int ranks_per_task_ = 1, tasks_ = 0;
  std::string task_word_ = "rank";
  bool step_mode_ = false, ended_ = false, started_ = false;
  std::string state_, reason_;  // the job's JobState and Reason, as scontrol last said
  std::unique_ptr<ChildProcess> srun_;
  std::vector<RankStatus> status_;
  std::optional<SchedulerReport> report_;
  std::optional<Clock::time_point> held_since_;
  Clock::time_point last_query_{};
  std::chrono::system_clock::time_point launched_;
};

}  // namespace

std::unique_ptr<RunningTrial> SlurmLauncher::launch(const std::vector<RankLaunch>& ranks) {
  return std::make_unique<SlurmTrial>(options_, ranks);
}

std::string SlurmLauncher::placement() const {
  // What decides the nodes a trial gets; the time limit does not.
  std::string text = "slurm nodes=" + std::to_string(options_.nodes) +
                     " tasks_per_node=" + std::to_string(options_.tasks_per_node) +
                     " partition=" + options_.partition + " account=" + options_.account +
                     " nodelist=" + options_.nodelist + " exclude=" + options_.exclude;
  for (const auto& arg : options_.srun_args) text += " " + arg;
  return text;
}

int SlurmLauncher::nodes_for(int ranks) const {
  return node_count(options_, ranks);
}

std::vector<std::string> slurm_nodes() {
  try {
    const char* list = std::getenv("SLURM_JOB_NODELIST");
    const std::string hosts = list && *list ? slurm::query({"scontrol", "show", "hostnames", list})
                                            : slurm::query({"sinfo", "-h", "-N", "-o", "%N"});
    std::vector<std::string> nodes;
    std::istringstream words(hosts);
    for (std::string node; words >> node;)
      if (nodes.empty() || nodes.back() != node) nodes.push_back(node);
    return nodes;
  } catch (const InfraError&) {
    return {};
  }
}

}  // namespace faultline::harness
