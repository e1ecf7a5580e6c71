// The processes below one process, read from /proc: a launcher such as torchrun starts each rank
// in a session of its own, out of reach of its group's signals, and a rank it leaves behind
// when it dies is no longer below anything faultline started.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace faultline::harness {

// A process as /proc showed it: its pid and its start time (clock ticks since boot), which
// tell it apart from a later process given the same pid.
struct SeenProcess {
  pid_t pid = 0;
  uint64_t started = 0;
};

// Every process below `root` down to `depth` generations (1: its children), not `root` itself.
std::vector<SeenProcess> descendants(pid_t root, int depth = 1 << 20);

// The outermost processes below `root` whose environment sets `variable` (e.g. RANK): the
// ranks a launcher started however deep they are (below a shell that wraps torchrun, say),
// without their own children, which inherit it (data loader workers). A process whose
// environment cannot be read counts as not setting it.
std::vector<SeenProcess> outermost_setting(pid_t root, const std::string& variable);

// Sends `signal` to each process still the one that was seen; the others are gone.
void signal_seen(const std::vector<SeenProcess>& processes, int signal);

}  // namespace faultline::harness
