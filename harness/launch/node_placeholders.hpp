// The placeholders of a trainer that starts its own ranks (ranks_from = "torchrun"), which only
// the launch knows: how many nodes and ranks per node, and, on each node, its rank and the
// address of the first node. Filled where the launcher process starts, not in the recipe.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace faultline::harness {

// {nnodes} {nproc_per_node} {node_rank} {master_addr}
const std::vector<std::string>& node_placeholders();

// `argv` with each {name} of `values` (names of node_placeholders()) replaced; other text,
// braces included, is left as it is (the recipe's own placeholders were filled before).
std::vector<std::string> fill_node_placeholders(std::vector<std::string> argv,
                                                const std::map<std::string, std::string>& values);

// {node_rank} and {master_addr} from NODE_RANK and MASTER_ADDR in `env`: the node a launcher
// process starts on is told by the environment it starts with (locally 0 and 127.0.0.1;
// on Slurm faultline-slurm-rank sets them from the task's).
std::vector<std::string> fill_node_of(std::vector<std::string> argv,
                                      const std::map<std::string, std::string>& env);

// The output of node `node`'s launcher process, which holds the output of its ranks.
std::string node_log(const std::string& out_dir, int node);

}  // namespace faultline::harness
