// Slurm's client commands (sbatch, srun, squeue, scontrol, scancel) as the Slurm launcher and
// its rank wrapper use them: run to completion, their output read back, their answers parsed.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/launch/launcher.hpp"

namespace faultline::harness::slurm {

// How a rank ended, as faultline-slurm-rank writes it to rank<N>.exit for the launcher to read:
// "exited CODE" or "signaled SIGNAL".
constexpr const char* kExitedWord = "exited";
constexpr const char* kSignaledWord = "signaled";
// faultline-slurm-rank OUT_DIR --node -- ARGV: the task is a node's launcher that starts its
// ranks itself (ranks_from = "torchrun"), not a rank.
constexpr const char* kNodeTaskFlag = "--node";

// Runs a Slurm client command and returns its stdout; a command that fails is an InfraError
// with its stderr.
std::string query(const std::vector<std::string>& argv,
                  const std::map<std::string, std::string>& env = {}, double timeout_s = 60);

// `scontrol show job -o ID` / `show node -o NAME`: the fields of the record ("JobState" →
// "RUNNING"); empty when Slurm no longer knows the job.
std::map<std::string, std::string> show(const std::string& kind, const std::string& id);

// The first host of a Slurm host list: "n[3-4,7],m1" → "n3".
std::string first_host(const std::string& hostlist);

// What a finished job's state (scontrol's JobState, NodeList, Reason) says about its end;
// nullopt for an ordinary one (COMPLETED, FAILED: the ranks' own exits tell).
std::optional<SchedulerReport> end_of_job(const std::string& state, const std::string& job,
                                          const std::string& nodes, const std::string& reason);

// The same from srun's output, where slurmstepd says why it kills a step ("*** STEP 5.0 ON n1
// CANCELLED AT ... DUE TO TIME LIMIT ***"); nullopt when it says nothing of the kind.
std::optional<SchedulerReport> end_in_step_output(const std::string& output);

// Job states after which the job is gone from squeue for good.
bool is_final_state(const std::string& state);

// Whether a pending job's Reason is one no wait resolves (the partition cannot hold the job, an
// invalid account or QOS, a dependency that can never be met), as opposed to Resources,
// Priority or a node that is down for now.
bool reason_never_resolves(const std::string& reason);

}  // namespace faultline::harness::slurm
