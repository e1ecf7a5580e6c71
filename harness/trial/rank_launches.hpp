// The ranks of one trial as the launcher starts them: one process per rank with the torchrun
// environment, or one process per node (torchrun) that starts that node's ranks, and a record
// stream per rank.
#pragma once

#include <string>
#include <vector>

#include "harness/contract/trainer_contract.hpp"
#include "harness/launch/launcher.hpp"

namespace faultline::harness {

// `nodes`: how many nodes the launcher spreads the trial over (Launcher::nodes_for); a trainer
// that starts its own ranks needs as many on each (else a UserError naming launcher.nodes).
std::vector<RankLaunch> rank_launches(const TrialSpec& spec, const contract::RankCommand& command,
                                      const std::string& out_dir, int master_port, int nodes = 1);

// A UserError unless `ranks` split evenly over `nodes`, as a trainer that starts its own ranks
// needs.
void check_node_split(int ranks, int nodes);

}  // namespace faultline::harness
