// The trainer contract, harness side: everything the harness asks of a trainer and how it is
// asked (DESIGN.md, "The trainer contract"). Phases ask for a prefix, a resume, an accumulation
// or a replay here and never spell a key; checkpoints are read from the trainer's events.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/contract/capability.hpp"
#include "harness/contract/command_recipe.hpp"
#include "harness/trial/trial.hpp"

namespace faultline::harness::contract {

// A checkpoint as the trainer's `checkpoint` (or `resume`) event named it: the state after `step`.
struct Checkpoint {
  int64_t step = 0;
  std::string path;
};

// How the harness reads a trainer's exit code.
enum class ExitMeaning {
  Finished,         // 0
  BadUsage,         // 2: the trainer refused its config or environment (or, with the helper,
                    //    an op its determinism forbids)
  HaltedNonfinite,  // 3: halted on a non-finite value; its records say where
  HaltedData,       // 4: halted on a data anomaly; its records say where
  OutOfMemory,      // 5: an allocation failed
  NotRunnable,      // 127: the command was not found
  Failed,           // anything else: a crash
};

// How one rank of a trial is started: the argv, what is added to its environment, where it
// runs, and where its records come from.
struct RankCommand {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::string cwd;  // "": faultline's own
  RecordSource records = RecordSource::Protocol;
  std::string log_regex, checkpoint_regex;  // with RecordSource::Log
  // Files to write into the run directory before it starts (path, text): the trainer's own
  // config file with the trial's values.
  std::vector<std::pair<std::string, std::string>> files;
  // One process (torchrun) starts every rank: it is launched once, with the environment below,
  // and each rank it starts writes FAULTLINE_METRICS with {rank} replaced.
  bool one_process = false;
};

class TrainerContract {
 public:
  // faultline-train: every capability but CheaperWithLessData.
  static const TrainerContract& bundled();
  // The contract of the trainer a recipe names: a [trainer] section's command, else the bundled.
  static TrainerContract of(const std::string& recipe_path);

  bool can(Capability capability) const;
  // "skipped <axis>: it needs the trainer capability '<capability>', which ... does not declare
  // (<the [trainer] key that gives it> in <recipe>)"; a log-only trainer cannot have probes.
  std::string skipped(const std::string& axis, Capability capability) const;
  // The same contract, its messages naming `recipe` as where the trainer is declared: a stored
  // run's trials read a copy of its config, and the file to edit is the run's own recipe.
  TrainerContract declared_in(const std::string& recipe) const;
  ExitMeaning exit_meaning(int exit_code) const;
  // A command trainer's name for messages ("the trainer python3 train.py"); "faultline-train".
  std::string name() const;
  bool is_command() const { return command_ != nullptr; }
  // ranks_from = "torchrun": one launcher process per node starts the ranks.
  bool starts_own_ranks() const;
  // Where its records come from (a log-only trainer has no fingerprints or probes).
  RecordSource records() const;

  // Each returns `spec` asked for one more thing (later settings win).
  TrialSpec prefix(TrialSpec spec, int64_t last_step) const;
  TrialSpec resume(TrialSpec spec, const std::optional<Checkpoint>& from) const;  // nullopt: step 0
  TrialSpec checkpoint_every(TrialSpec spec, int64_t every) const;                // 0: none
  // The recipe key a user sets for it (`--set KEY=N`): train.checkpoint_every, or a command
  // trainer's faultline.checkpoint_every.
  std::string checkpoint_every_key() const;
  TrialSpec checkpoint_on_halt(TrialSpec spec, bool on) const;
  // Replays the global batches on `ranks` ranks, each accumulating `accumulate` micro-batches.
  TrialSpec accumulate(TrialSpec spec, int ranks, int64_t accumulate) const;
  TrialSpec full_probes_from(TrialSpec spec, int64_t step) const;
  TrialSpec replay(TrialSpec spec, int64_t step, const std::vector<uint64_t>& samples) const;
  TrialSpec replica(TrialSpec spec) const;  // every rank fed the same batch at the replay step
  TrialSpec fingerprints_every_step(TrialSpec spec) const;

  // The keys of a trial's scale, as the trainer reads them: its prefix, data fraction, ranks.
  std::vector<std::string> scale_overrides(const TrialSpec& spec) const;
  // A key that changes how a run is watched or cut, not what it computes (a config search
  // leaves it alone).
  bool watches_only(const std::string& key) const;

  // The per-rank micro-batch count a spec runs with (the recipe's, or an override's).
  int64_t grad_accum(const TrialSpec& spec) const;
  // The steps a spec runs: its prefix, or the recipe's whole run.
  int64_t steps(const TrialSpec& spec) const;
  // The data fraction a spec trains on (the recipe's unless the spec overrides it).
  double data_fraction(const TrialSpec& spec) const;

  // How each rank of `spec` is started, its records going to `out_dir`. `trainer` is the path
  // of faultline-train (unused by a command trainer).
  RankCommand rank_command(const TrialSpec& spec, const std::string& trainer,
                           const std::string& out_dir, int master_port = 0) const;
  // The command line a person runs to reproduce `spec` (faultline-train: without --out; a
  // command trainer's run directory, {out} and FAULTLINE_OUT, is kPastedOutDir in its folder).
  std::vector<std::string> argv(const TrialSpec& spec, const std::string& trainer) const;
  // That command as shell text. With several ranks and a trainer that runs one rank per process,
  // a loop starts one per rank with the torchrun variables, as a trial does; a trainer that
  // starts its own ranks (ranks_from = "torchrun") is the one command.
  std::string pasted_command(const TrialSpec& spec, const std::string& trainer) const;
  static constexpr const char* kPastedOutDir = "faultline-repro";

 private:
  TrainerContract() = default;
  std::shared_ptr<const CommandTrainer> command_;  // null: faultline-train
  std::string declared_in_;                        // "": command_'s own source
};

// The variables a trial speaks to its trainer through: FAULTLINE_METRICS, _OUT, _RESUME,
// _STACKS, _HOST and each ask's FAULTLINE_<NAME> (ask_names()).
std::vector<std::string> trial_variables();
// Unsets them in this process, whose environment every rank inherits: a trial is given the ones
// it asks and no others (a job script that exported the helper's FAULTLINE_RESUME would
// otherwise make every trial resume from that checkpoint).
void forget_inherited_trial_variables();

// Every checkpoint a stored run's `resume` and `checkpoint` events name, in event order.
std::vector<Checkpoint> named_checkpoints(const store::Store& store, int64_t run_id);
// The paths that several of them name with different steps, each with its steps in order: one
// file saved over at each checkpoint, which holds the last step's state only.
std::map<std::string, std::vector<int64_t>> saved_over(const std::vector<Checkpoint>& named);
// The checkpoints a replay may start from, by step: the one it resumed from (if any), then those
// it wrote. Only files (or folders) that still exist, and of a path saved over, its last step.
std::vector<Checkpoint> checkpoints(const store::Store& store, int64_t run_id);
// The same, of checkpoints already read with named_checkpoints.
std::vector<Checkpoint> replayable(const std::vector<Checkpoint>& named);
// The last of them before `step` (step 0 counts as a fresh start: nullopt).
std::optional<Checkpoint> last_before(const std::vector<Checkpoint>& checkpoints, int64_t step);
std::optional<Checkpoint> at_step(const std::vector<Checkpoint>& checkpoints, int64_t step);

}  // namespace faultline::harness::contract
