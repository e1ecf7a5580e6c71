// Tests for harness/launch/node_placeholders.cpp: a launcher process's node placeholders, filled
// from the layout and from the environment it starts with.
#include <gtest/gtest.h>

#include "harness/launch/node_placeholders.hpp"

namespace faultline::harness {
namespace {

using Argv = std::vector<std::string>;

TEST(NodePlaceholders, OnlyTheNamedPlaceholdersAreFilledEveryTimeTheyAppear) {
  const Argv argv = {"torchrun",
                     "--nnodes={nnodes}",
                     "--rdzv_endpoint={master_addr}:29500",
                     "{node_rank}{node_rank}",
                     "{other}",
                     "{{nnodes}"};
  EXPECT_EQ(fill_node_placeholders(argv, {{"nnodes", "2"}}),
            (Argv{"torchrun", "--nnodes=2", "--rdzv_endpoint={master_addr}:29500",
                  "{node_rank}{node_rank}", "{other}", "{2"}));
  // A value that holds its own placeholder is not filled again.
  EXPECT_EQ(fill_node_placeholders({"{node_rank}-{node_rank}"}, {{"node_rank", "{node_rank}x"}}),
            (Argv{"{node_rank}x-{node_rank}x"}));
}

TEST(NodePlaceholders, TheNodesRankAndAddressComeFromTheEnvironmentItStartsWith) {
  const Argv argv = {"launch",        "--node_rank", "{node_rank}", "--master_addr",
                     "{master_addr}", "--nnodes",    "{nnodes}"};
  EXPECT_EQ(
      fill_node_of(argv, {{"NODE_RANK", "1"}, {"MASTER_ADDR", "10.0.0.7"}, {"RANK", "5"}}),
      (Argv{"launch", "--node_rank", "1", "--master_addr", "10.0.0.7", "--nnodes", "{nnodes}"}));
  // Without them nothing is guessed.
  EXPECT_EQ(fill_node_of(argv, {}), argv);
}

TEST(NodePlaceholders, ANodesLogIsNamedByTheNode) {
  EXPECT_EQ(node_log("/runs/run-3", 1), "/runs/run-3/node1.log");
  EXPECT_EQ(node_placeholders(), (Argv{"nnodes", "nproc_per_node", "node_rank", "master_addr"}));
}

}  // namespace
}  // namespace faultline::harness
