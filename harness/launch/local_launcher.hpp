// Starts ranks as child processes on this machine (harness/child_process.hpp), each in its own
// process group so that killing a rank also kills anything it started.
#pragma once

#include "harness/launch/launcher.hpp"

namespace faultline::harness {

class LocalLauncher : public Launcher {
 public:
  const char* name() const override { return "local"; }
  std::unique_ptr<RunningTrial> launch(const std::vector<RankLaunch>& ranks) override;
  std::unique_ptr<Launcher> clone() const override { return std::make_unique<LocalLauncher>(); }
};

// A TCP port on the loopback interface that was free when asked (for MASTER_PORT).
int pick_free_port();

}  // namespace faultline::harness
