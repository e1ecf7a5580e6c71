// Starts the ranks of a trial through Slurm: an `srun` step inside the current allocation when
// SLURM_JOB_ID is set, else an `sbatch` job polled with scontrol. Each task runs
// faultline-slurm-rank, which gives it the trainer environment and records how it ended.
#pragma once

#include "harness/launch/launcher.hpp"
#include "harness/launch/launcher_config.hpp"

namespace faultline::harness {

class SlurmLauncher : public Launcher {
 public:
  explicit SlurmLauncher(SlurmOptions options) : options_(std::move(options)) {}
  const char* name() const override { return "slurm"; }
  std::unique_ptr<RunningTrial> launch(const std::vector<RankLaunch>& ranks) override;
  int nodes_for(int ranks) const override;
  std::unique_ptr<Launcher> clone() const override {
    return std::make_unique<SlurmLauncher>(options_);
  }
  std::string placement() const override;
  std::vector<std::string> sets() const override { return options_.sets; }

 private:
  SlurmOptions options_;
};

// The nodes of the current allocation (SLURM_JOB_NODELIST expanded), or every node of the
// cluster's default partition outside one; empty when Slurm cannot be asked.
std::vector<std::string> slurm_nodes();

}  // namespace faultline::harness
