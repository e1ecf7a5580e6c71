// With one launcher process per node, the first rank of each node's launch starts it and the
// others only name the files their records and output go to (docs/external-trainers.md,
// "ranks_from").
#include "harness/trial/rank_launches.hpp"

#include <fmt/format.h>

#include <memory>

#include "common/error.hpp"
#include "harness/launch/log_records.hpp"
#include "harness/launch/node_placeholders.hpp"
#include "harness/trial/import_files.hpp"

namespace faultline::harness {

namespace {

// Each node's launcher: argv with the layout filled (the same on every node, as one srun runs
// it); its node's rank and the first node's address come from the environment it starts with.
std::vector<RankLaunch> node_launches(const TrialSpec& spec, const contract::RankCommand& command,
                                      const std::string& out_dir, int master_port, int nodes) {
  check_node_split(spec.ranks, nodes);
  const int per_node = spec.ranks / nodes;
  const auto argv = fill_node_placeholders(
      command.argv,
      {{"nnodes", std::to_string(nodes)}, {"nproc_per_node", std::to_string(per_node)}});
  std::vector<RankLaunch> ranks;
  for (int rank = 0; rank < spec.ranks; ++rank) {
    RankLaunch launch;
    launch.rank = rank;
    launch.cwd = command.cwd;
    launch.metrics_path = out_dir + "/metrics.rank" + std::to_string(rank) + ".jsonl";
    launch.log_path = node_log(out_dir, rank / per_node);
    launch.stacks_path = stacks_file(out_dir, rank);
    if (rank % per_node == 0) {
      launch.argv = argv;
      launch.starts_ranks = per_node;
      launch.env = {{"NODE_RANK", std::to_string(rank / per_node)},
                    {"MASTER_ADDR", "127.0.0.1"},
                    {"MASTER_PORT", std::to_string(master_port)},
                    {"FAULTLINE_METRICS", out_dir + "/metrics.rank{rank}.jsonl"},
                    {"FAULTLINE_STACKS", out_dir + "/stacks.rank{rank}.txt"}};
      launch.env.insert(command.env.begin(), command.env.end());
    }
    ranks.push_back(launch);
  }
  return ranks;
}

}  // namespace

void check_node_split(int ranks, int nodes) {
  if (nodes >= 1 && ranks % nodes == 0) return;
  throw UserError(
      fmt::format("a trainer that starts its own ranks (ranks_from = \"torchrun\") starts as "
                  "many on each node: {} ranks do not split evenly over {} nodes",
                  ranks, nodes),
      "launcher.nodes, launcher.tasks_per_node",
      "give --ranks a multiple of the nodes, or set launcher.tasks_per_node");
}

std::vector<RankLaunch> rank_launches(const TrialSpec& spec, const contract::RankCommand& command,
                                      const std::string& out_dir, int master_port, int nodes) {
  if (command.one_process) return node_launches(spec, command, out_dir, master_port, nodes);
  std::shared_ptr<const LogRecords> log_records;
  if (command.records == contract::RecordSource::Log)
    log_records = std::make_shared<const LogRecords>(LogRecords::compile(
        command.log_regex, command.checkpoint_regex, " in " + spec.config_path, command.cwd));
  std::vector<RankLaunch> ranks;
  for (int rank = 0; rank < spec.ranks; ++rank) {
    RankLaunch launch;
    launch.rank = rank;
    launch.cwd = command.cwd;
    launch.log_records = log_records;
    launch.metrics_path = out_dir + "/metrics.rank" + std::to_string(rank) + ".jsonl";
    launch.log_path = out_dir + "/rank" + std::to_string(rank) + ".log";
    launch.argv = command.argv;
    launch.env = {{"RANK", std::to_string(rank)},
                  {"WORLD_SIZE", std::to_string(spec.ranks)},
                  {"LOCAL_RANK", std::to_string(rank)},
                  {"MASTER_ADDR", "127.0.0.1"},
                  {"MASTER_PORT", std::to_string(master_port)},
                  {"FAULTLINE_METRICS", launch.metrics_path}};
    launch.env.insert(command.env.begin(), command.env.end());
    if (static_cast<size_t>(rank) < spec.hosts.size())
      launch.env["FAULTLINE_HOST"] = spec.hosts[static_cast<size_t>(rank)];
    ranks.push_back(launch);
  }
  return ranks;
}

}  // namespace faultline::harness
