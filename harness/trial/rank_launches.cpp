// With one process for all ranks, rank 0's launch starts it and the others only name the files
// their records and output go to (docs/external-trainers.md, "ranks_from").
#include "harness/trial/rank_launches.hpp"

#include <memory>

#include "harness/launch/log_records.hpp"
#include "harness/trial/import_files.hpp"

namespace faultline::harness {

std::vector<RankLaunch> rank_launches(const TrialSpec& spec, const contract::RankCommand& command,
                                      const std::string& out_dir, int master_port) {
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
    if (command.one_process) {
      // The launcher's own output holds every rank's; only rank 0 starts a process.
      launch.log_path = out_dir + "/rank0.log";
      launch.stacks_path = stacks_file(out_dir, rank);
      if (rank == 0) {
        launch.argv = command.argv;
        launch.env = {{"MASTER_ADDR", "127.0.0.1"},
                      {"MASTER_PORT", std::to_string(master_port)},
                      {"FAULTLINE_METRICS", out_dir + "/metrics.rank{rank}.jsonl"},
                      {"FAULTLINE_STACKS", out_dir + "/stacks.rank{rank}.txt"}};
        launch.env.insert(command.env.begin(), command.env.end());
      }
      ranks.push_back(launch);
      continue;
    }
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
