// A rank that died after its end event said how its run ended: torch over Gloo aborts now and then
// at interpreter exit (docs/external-trainers.md). Which ranks did, and the warning for each; how
// a rank died and its stacks, which a crash's detail says too.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "harness/launch/supervisor.hpp"
#include "probes/detectors/failure.hpp"

namespace faultline::harness {

// Whether `rank` died after its end event said how the run ended: of a signal after `ok`,
// `nonfinite`, `data_anomaly` or `oom`, or with a non-zero exit after `ok` (a halt's exit code is
// its status, not a death). A kill by faultline or by the scheduler is not such a death.
bool died_after_its_end(const SupervisedResult& result, size_t rank);

// "died of SIGABRT" or "exited with code 1", with the error its end event names, if any.
std::string how_it_died(const RankStatus& status, const EndEvent& end);

// "; its stacks (from its log): ..." when a Python trainer's faulthandler printed them in the
// rank's own log as it died; "" otherwise (ranks a launcher started share one log).
std::string stacks_of_rank(const RankLaunch& rank);

// One teardown_crash warning per rank that died after its end event, in rank order.
std::vector<detectors::Failure> teardown_warnings(const SupervisedResult& result,
                                                  const std::vector<RankLaunch>& ranks);

}  // namespace faultline::harness
