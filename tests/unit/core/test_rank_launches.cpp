// Tests for harness/trial/rank_launches.cpp: one process per rank with the torchrun variables,
// or one launcher process per node that starts that node's ranks.
#include <gtest/gtest.h>

#include "harness/trial/rank_launches.hpp"
#include "test_support.hpp"

namespace faultline::harness {
namespace {

using faultline::testing::user_error;
using Argv = std::vector<std::string>;

contract::RankCommand launcher_command() {
  contract::RankCommand command;
  command.argv = {"torchrun",         "--nnodes",    "{nnodes}",    "--nproc_per_node",
                  "{nproc_per_node}", "--node_rank", "{node_rank}", "--master_addr",
                  "{master_addr}",    "train.py"};
  command.env = {{"FAULTLINE_OUT", "/runs/run-4"}};
  command.one_process = true;
  return command;
}

TEST(RankLaunches, EachRankIsAProcessWithTheTorchrunVariablesAndItsHost) {
  TrialSpec spec;
  spec.ranks = 2;
  spec.hosts = {"h1"};
  contract::RankCommand command;
  command.argv = {"python3", "train.py"};
  const auto ranks = rank_launches(spec, command, "/runs/run-4", 29400);
  ASSERT_EQ(ranks.size(), 2u);
  for (const auto& rank : ranks) {
    EXPECT_EQ(rank.argv, command.argv);
    EXPECT_EQ(rank.starts_ranks, 0);
    EXPECT_EQ(rank.env.at("RANK"), std::to_string(rank.rank));
    EXPECT_EQ(rank.env.at("WORLD_SIZE"), "2");
    EXPECT_EQ(rank.env.at("MASTER_PORT"), "29400");
    EXPECT_EQ(rank.log_path, "/runs/run-4/rank" + std::to_string(rank.rank) + ".log");
  }
  EXPECT_EQ(ranks[0].env.at("FAULTLINE_HOST"), "h1");
  EXPECT_EQ(ranks[1].env.count("FAULTLINE_HOST"), 0u);
}

TEST(RankLaunches, ALauncherThatStartsItsOwnRanksIsOneProcessPerNode) {
  TrialSpec spec;
  spec.ranks = 4;
  const auto ranks = rank_launches(spec, launcher_command(), "/runs/run-4", 29400, 2);
  ASSERT_EQ(ranks.size(), 4u);
  // Ranks 0 and 2 start their node's launcher; 1 and 3 live in it.
  const Argv filled = {"torchrun",
                       "--nnodes",
                       "2",
                       "--nproc_per_node",
                       "2",
                       "--node_rank",
                       "{node_rank}",
                       "--master_addr",
                       "{master_addr}",
                       "train.py"};
  for (int rank : {0, 2}) {
    EXPECT_EQ(ranks[rank].argv, filled) << rank;
    EXPECT_EQ(ranks[rank].starts_ranks, 2);
    EXPECT_EQ(ranks[rank].env.at("NODE_RANK"), std::to_string(rank / 2));
    EXPECT_EQ(ranks[rank].env.at("FAULTLINE_METRICS"), "/runs/run-4/metrics.rank{rank}.jsonl");
    EXPECT_EQ(ranks[rank].env.at("FAULTLINE_OUT"), "/runs/run-4");
    EXPECT_EQ(ranks[rank].env.count("RANK"), 0u);
  }
  for (int rank : {1, 3}) EXPECT_TRUE(ranks[rank].argv.empty()) << rank;
  // Each rank's records are its own; its output is its node's launcher's.
  EXPECT_EQ(ranks[3].metrics_path, "/runs/run-4/metrics.rank3.jsonl");
  EXPECT_EQ(ranks[1].log_path, "/runs/run-4/node0.log");
  EXPECT_EQ(ranks[3].log_path, "/runs/run-4/node1.log");
  EXPECT_EQ(ranks[3].stacks_path, "/runs/run-4/stacks.rank3.txt");

  // On one node (locally) it starts them all.
  const auto local = rank_launches(spec, launcher_command(), "/runs/run-4", 29400);
  EXPECT_EQ(local[0].starts_ranks, 4);
  EXPECT_EQ(local[0].argv[2], "1");
  EXPECT_EQ(local[0].argv[4], "4");
  EXPECT_EQ(local[0].env.at("MASTER_ADDR"), "127.0.0.1");
}

TEST(RankLaunches, RanksThatDoNotSplitEvenlyOverTheNodesAreAUserError) {
  TrialSpec spec;
  spec.ranks = 3;
  const auto error = user_error([&] { rank_launches(spec, launcher_command(), "/r", 1, 2); });
  EXPECT_EQ(error.what,
            "a trainer that starts its own ranks (ranks_from = \"torchrun\") starts as many on "
            "each node: 3 ranks do not split evenly over 2 nodes");
  EXPECT_EQ(error.where, "launcher.nodes, launcher.tasks_per_node");
  // A trainer started once per rank is spread by the launcher as it likes.
  contract::RankCommand per_rank;
  per_rank.argv = {"python3"};
  EXPECT_EQ(rank_launches(spec, per_rank, "/r", 1, 2).size(), 3u);
}

}  // namespace
}  // namespace faultline::harness
