// The trainer contract, harness side: everything the harness asks of a trainer and how it is
// asked (DESIGN.md, "The trainer contract"). Phases ask for a prefix, a resume, an accumulation
// or a replay here and never spell a key; checkpoints are read from the trainer's events.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/trial/trial.hpp"

namespace faultline::harness::contract {

// What a search may ask; a trainer declares which it can do.
enum class Capability {
  Prefix,               // stop after step N
  Resume,               // continue bitwise from a checkpoint
  Checkpoints,          // write a checkpoint every N steps, and the last good state on a halt
  DataFraction,         // train on a fraction of the data
  CheaperWithLessData,  // ... and a smaller fraction makes a trial cheaper (epoch-bound runs)
  Accumulate,           // one rank replays an N-rank global batch with N-fold accumulation
  FullProbes,           // per-module probes from step k
  ReplaySamples,        // replay step k on a subset of its samples
  ReplicaMode,          // every rank fed the same batch
  Fingerprints,         // a bitwise digest of grads and params every step
};
const char* to_string(Capability capability);

// A checkpoint as the trainer's `checkpoint` (or `resume`) event named it: the state after `step`.
struct Checkpoint {
  int64_t step = 0;
  std::string path;
};

// How the harness reads a trainer's exit code.
enum class ExitMeaning {
  Finished,         // 0
  BadUsage,         // 2: the trainer refused its config or environment before training
  HaltedNonfinite,  // 3: halted on a non-finite value; its records say where
  HaltedData,       // 4: halted on a data anomaly; its records say where
  OutOfMemory,      // 5: an allocation failed
  NotRunnable,      // 127: the command was not found
  Failed,           // anything else: a crash
};

class TrainerContract {
 public:
  // faultline-train: every capability.
  static const TrainerContract& bundled();

  bool can(Capability capability) const;
  // "skipped: <axis> needs <capability>, which the trainer does not declare".
  std::string skipped(const std::string& axis, Capability capability) const;
  ExitMeaning exit_meaning(int exit_code) const;

  // Each returns `spec` asked for one more thing (later settings win).
  TrialSpec prefix(TrialSpec spec, int64_t last_step) const;
  TrialSpec resume(TrialSpec spec, const std::optional<Checkpoint>& from) const;  // nullopt: step 0
  TrialSpec checkpoint_every(TrialSpec spec, int64_t every) const;                // 0: none
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

 private:
  TrainerContract() = default;
};

// The checkpoints a stored run's events name, by step: the one it resumed from (if any), then
// those it wrote. Only files that still exist.
std::vector<Checkpoint> checkpoints(const store::Store& store, int64_t run_id);
// The last of them before `step` (step 0 counts as a fresh start: nullopt).
std::optional<Checkpoint> last_before(const std::vector<Checkpoint>& checkpoints, int64_t step);
std::optional<Checkpoint> at_step(const std::vector<Checkpoint>& checkpoints, int64_t step);

}  // namespace faultline::harness::contract
