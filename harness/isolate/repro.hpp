// `faultline repro`: run a finding's minimal reproduction again and compare it with the stored
// evidence — the failure, the bits of every step record and fingerprint, and the facts that
// decide the bits (CPU, BLAS and its kernel, threads, LibTorch).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/trial/trial_cache.hpp"

namespace faultline::store {
struct FindingInfo;
}

namespace faultline::harness {

// Identical: bit for bit. WithinTolerance: a fact that decides the bits differs and the loss stays
// within the tolerance. Differs: the failure came back, the numbers did not. NotReproduced: the
// failure did not come back.
enum class ReproVerdict { Identical, WithinTolerance, Differs, NotReproduced };

struct ReproOptions {
  std::optional<double> tolerance;  // nullopt: the one stored with the finding
  std::string work_dir;             // where the stored config is written as a recipe
};

struct ReproReport {
  ReproVerdict verdict = ReproVerdict::NotReproduced;
  std::string recipe_changed;      // "" or why the recipe file no longer gives the stored config
  bool reproduced = false;         // the same failure kind (at the same step, when it has one)
  bool bitwise_identical = false;  // every step record and fingerprint equal, bit for bit
  std::vector<std::string> differing_facts;  // "blas_kernel: Haswell -> SkylakeX"
  // Step records compared: 0 when the failure came before either run wrote one (a crash in
  // the first replayed step), and then nothing differs.
  int64_t records_compared = 0;
  double max_rel_loss_diff = 0;   // over the steps both runs have
  bool within_tolerance = false;  // max_rel_loss_diff <= tolerance
  double tolerance = 0;
  int64_t run_id = 0;
  int64_t evidence_run = 0;
  int64_t failure_step = -1;
  std::optional<int64_t> expected_step;  // the evidence's failure step, where it has one
};

// Relative loss difference accepted when a fact that decides the bits differs. Measured: 1 rank
// with accumulation against N ranks differs by at most 1.4e-7 (docs/trainer.md); a different
// BLAS kernel reorders every GEMM sum, so the bound here is looser and only a sanity check.
constexpr double kReproTolerance = 1e-3;

// Replays the finding's stored reproduction and compares it with the evidence. Throws InfraError
// when the replay could not run, Interrupted when SIGINT/SIGTERM cut it short.
ReproReport reproduce_finding(store::Store& store, TrialCache& cache,
                              const store::FindingInfo& finding, const ReproOptions& options);

}  // namespace faultline::harness
