// The ranks of one trial as the launcher starts them: one process per rank with the torchrun
// environment, or one process (torchrun) that starts them all and a record stream per rank.
#pragma once

#include <string>
#include <vector>

#include "harness/contract/trainer_contract.hpp"
#include "harness/launch/launcher.hpp"

namespace faultline::harness {

std::vector<RankLaunch> rank_launches(const TrialSpec& spec, const contract::RankCommand& command,
                                      const std::string& out_dir, int master_port);

}  // namespace faultline::harness
