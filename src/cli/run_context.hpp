// What every run command shares: the store's path, the trainer binary, the work directory, the
// detector thresholds, and a SIGINT flag so an interrupted command leaves a consistent store.
// One instance serves the whole command line, so `faultline --db x runs` and
// `faultline runs --db x` mean the same (as `git -C`).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/launch/launcher_config.hpp"
#include "harness/trial/trial.hpp"
#include "store/store.hpp"

namespace CLI {
class App;
}

namespace faultline::cli {

struct RunContextOptions {
  std::string db;        // --db, else FAULTLINE_DB, else ./faultline.db
  std::string trainer;   // --trainer, else FAULTLINE_TRAIN, else next to this binary
  std::string work_dir;  // --work-dir, else ./faultline-runs
  std::string
      detectors;  // --detectors, else the built-in defaults (recipes/detectors/default.toml)
  double step_timeout_s = 60;
  double startup_s = 120;
  bool json = false;
  bool quiet = false;    // no progress lines on stderr
  bool cupti = false;    // --cupti: every rank runs with the CUPTI probe (CUDA_INJECTION64_PATH)
  std::string launcher;  // --launcher; "": the recipe's launcher.kind (default local)
};

// The one instance the options of every command write to.
RunContextOptions& shared_context();

// Adds --db, --trainer, --work-dir, --detectors, --step-timeout, --json, --quiet to a command
// (the top-level app included), bound to shared_context().
void add_context_options(CLI::App& command);
// --launcher local|slurm, for the commands that run trials.
void add_launcher_option(CLI::App& command);
// The launcher section of a run command: --launcher over the recipe's [launcher] (with --set).
harness::LauncherConfig launcher_config(const RunContextOptions& options, const std::string& recipe,
                                        const std::vector<std::string>& overrides);
// The values of the `--set` arguments of a stored run's command line (the bundled trainer's),
// in order: "launcher.nodes=2", ...
std::vector<std::string> set_assignments(const std::vector<std::string>& argv);

// The launcher section of a command that replays stored run `run_id` (isolate --run, bisect
// --run): its recipe's [launcher] and the launcher keys of its command line, then this command's
// --set. It replays where it ran (a run on Slurm, on the cluster where its GPUs are) unless
// --launcher says otherwise; `took_runs_launcher` says whether Slurm was so chosen.
harness::LauncherConfig launcher_config_of_run(const RunContextOptions& options,
                                               const store::Store& store, int64_t run_id,
                                               const std::vector<std::string>& overrides,
                                               bool& took_runs_launcher);
// The launcher of a run command: --launcher over the recipe's [launcher] section (with --set).
std::unique_ptr<harness::Launcher> make_launcher(const RunContextOptions& options,
                                                 const std::string& recipe,
                                                 const std::vector<std::string>& overrides);

// Only --db and --json: the commands that read the store and run nothing.
void add_store_options(CLI::App& command);

// Long names of a command's options and its parents' ("--step-timeout"), for suggestions.
std::vector<std::string> option_names(const CLI::App& command);
// Whether `option` was given to `command` or to a command above it (options every command shares
// are accepted before the subcommand too).
bool option_given(const CLI::App& command, const std::string& option);

// A hang's timeout for replays of stored run `run_id` when --step-timeout is not given: 20 times
// its slowest step, times its ranks (a one-rank replay accumulates them all), at least 10 s.
// nullopt: the run has no step times.
std::optional<double> step_timeout_of_run(const store::Store& store, int64_t run_id);

// The bundled-contract trainer executable stored run `run_id` ran (its argv's first word, a
// `faultline-train -c ...` command line), when neither --trainer nor FAULTLINE_TRAIN chooses one:
// its replays run it too (a build of another commit, a wrapper), with a line on stderr saying
// so. UserError when it is gone. Leaves `options.trainer` as it was for a command trainer's run.
void take_trainer_of_run(const store::Store& store, int64_t run_id, RunContextOptions& options,
                         const std::string& command, const std::string& where);

// -c of a run command: a recipe file, or the name of an installed one ("tiny"); absolute.
std::string resolve_train_recipe(const std::string& given, const std::string& option = "-c");

std::string resolve_db_path(const std::string& flag);

// The store of a command that only reads it (runs, show, findings, export, report, diff, gc,
// reference list|show): a missing file is a user error naming the path, not an empty store
// created where the user mistyped --db or stood in another folder.
store::Store open_existing_store(const std::string& flag);
// The same check alone, for a command that then opens the store to write (repro, reference add).
void require_store(const std::string& flag);
std::string resolve_trainer(const std::string& flag);
harness::RunnerOptions runner_options(const RunContextOptions& options);

// Opens the store and marks runs whose owner process on this host is gone as interrupted (a
// faultline killed with SIGKILL cannot do it itself); their rows are kept.
store::Store open_store(const RunContextOptions& options);

// What decides a trial's verdict besides its spec: the detector thresholds and timeouts. Part
// of every cached trial's identity.
std::string judge_identity(const RunContextOptions& options);

// Installs the SIGINT/SIGTERM handler (once) and returns the flag it sets.
const std::atomic<bool>* interrupt_flag();

}  // namespace faultline::cli
