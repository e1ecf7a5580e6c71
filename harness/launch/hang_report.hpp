// What a hang looks like from the ranks' records: which ranks stopped short, and the collective
// the others wait in. Shared by the live supervisor and the import of a job stopped from outside.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace faultline::harness {

struct HangReport {
  std::vector<int> ranks;  // the ranks that stopped short (all ranks when none stands out)
  int64_t step = 0;        // the step they did not finish (last completed + 1)
  double silent_s = 0;
  // From the ranks' collective heartbeats: the collective the others wait in, which `ranks`
  // never entered; 0 when no rank reported one (one rank, or a trainer without heartbeats).
  int64_t collective = 0;
  std::vector<int> waiting;  // the ranks blocked in it
};

// From each rank's last step record and the newest collective heartbeat it wrote (0: none).
HangReport describe_hang(const std::vector<int64_t>& last_step, const std::vector<int64_t>& entered,
                         double silent_s);

// "rank(s) 1 never entered collective #132 (step 130) that rank(s) 0 wait in"; "" when the
// heartbeats name no collective.
std::string collective_wait(const HangReport& hang);

// The stacks a rank wrote when asked (Python's faulthandler: "Thread 0x... (most recent call
// first):" blocks) in a log or stacks file, each distinct block once, at most 40 lines, each on
// its own indented line; "" when it wrote none.
std::string stacks_in_log(const std::string& path);

}  // namespace faultline::harness
