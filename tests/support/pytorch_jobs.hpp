// Test support for the e2e tests of examples/pytorch/train.py, the user's own script: run as a
// job runs it (without faultline, the helper's variables set by its job script), imported, and
// isolated from its own checkpoints.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "support/cli.hpp"
#include "support/process.hpp"

namespace faultline::testing {

inline const std::string kExamples = FAULTLINE_SOURCE_DIR "/examples/pytorch";
inline const std::string kHelper = kExamples + "/train.toml";      // train.py with the helper
inline const std::string kLogOnly = kExamples + "/log_only.toml";  // a script that only prints

// The kinds of a --json document's failures.
std::vector<std::string> kinds_of(const nlohmann::json& failures);
// The kinds that fail the run: not a warning, such as the teardown_crash torch 1.13 over Gloo now
// and then adds to a DDP run that ended well (it aborts the process as it exits).
std::vector<std::string> failing_kinds_of(const nlohmann::json& failures);

// A sample of train.py's synthetic corpus (1,023 samples, seed 1234, batches of 8: the same
// sampler as faultline-train) first drawn at a step in (from, to], and that step.
std::pair<uint64_t, int64_t> sample_first_drawn_in(int64_t from, int64_t to);

// train.py run as a job would run it, without faultline: the helper's variables set by the job
// script, its metrics and checkpoints (every 50 steps) in `job`.
ProcessResult run_helper_job(const std::string& job, std::vector<std::string> args);

// One rank of a job, run as its job script runs it: the helper's variables, its stacks to
// FAULTLINE_STACKS, checkpoints every 50 steps in `job`, the torchrun variables.
ProcessSpec job_rank(const std::string& job, int rank, int world, const std::string& port,
                     const std::vector<std::string>& args);

// That rank, stopped as a job's time limit stops it once `watched` holds `text`: SIGUSR1
// (sbatch --signal=USR1@60), again about every second until the rank's stacks show `where` (a
// rank may still be on its way to a planted hang), then SIGTERM, once `stalled_s` seconds have
// passed since `text` showed (a time limit comes long after a hang began).
ProcessSpec job_rank_stopped_by_time_limit(const std::string& job, int rank, int world,
                                           const std::string& port,
                                           const std::vector<std::string>& args,
                                           const std::string& watched, const std::string& text,
                                           const std::string& where, double stalled_s = 0);

// `faultline import JOB -c train.toml --json` with these --set keys.
Cli import_helper_job(const std::string& dir, const std::string& job,
                      const std::vector<std::string>& sets);

// `faultline isolate --run ID ARGS --json` of the run `imported` (or a `train`) stored.
Cli isolate_imported(const std::string& dir, const Cli& imported,
                     const std::vector<std::string>& args = {});

// `isolate --run` of a stored run whose NaN at step 150 follows its checkpoint of step 100: the
// search starts from that checkpoint (one interval, then at most a one-step replay per half
// batch), and `repro` of the finding is bitwise identical. Returns the finding's document.
// `extra_steps`: the determinism check of a replay that cannot match the stored run's bits (a
// 2-rank run replayed on one rank runs 10 of its steps again).
nlohmann::json expect_isolated_from_checkpoint_100(const std::string& dir, const std::string& run,
                                                   int64_t extra_steps = 0);

// train.toml started by tests/e2e/launchers/spawn_ranks.py, a launcher that starts its ranks
// itself as torchrun does, one per node (ranks_from = "torchrun", its node placeholders), with
// `launcher_args` more of its own (--sessions), itself started by `wrapper` (words before it in
// the command: a shell, say) when given: written into `dir`, its path returned.
std::string helper_launched_per_node(const std::string& dir,
                                     const std::vector<std::string>& launcher_args = {},
                                     const std::vector<std::string>& wrapper = {});

// How many processes have `text` in their environment (e.g. a test's folder, which their
// FAULTLINE_METRICS names) after up to 5 s for those being killed to go: what a trial left
// running.
int processes_left_mentioning(const std::string& text);

// Rank 1 of 2 hangs at step 5: the finding names it and quotes its Python stack.
void expect_hang_of_rank_one_with_its_stack(const std::string& recipe, const std::string& dir,
                                            std::vector<std::string> sets = {});

}  // namespace faultline::testing
