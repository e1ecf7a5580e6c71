// `faultline gc`: which run directories and checkpoints no stored finding needs, and removing
// them. The store's rows stay (a run's records, verdict and failures remain browsable); what a
// finding's repro resumes from is never removed. Checkpoints are known from the trainer's
// checkpoint events, a run's directory from its stored command line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/duration.hpp"
#include "common/metrics_record.hpp"
#include "store/store.hpp"

namespace faultline::harness {

// Repro: keep only the checkpoints findings' repros resume from (and their run directories).
// Everything (--keep-findings): also every file of the runs a finding names as its evidence.
enum class KeepFindings { Repro, Everything };

struct GcOptions {
  KeepFindings keep = KeepFindings::Repro;
  std::optional<Clock::time_point> older_than;  // only runs that ended before this
};

enum class GcAction { RemoveDirectory, RemoveCheckpoint };

struct GcItem {
  int64_t run_id = 0;
  GcAction action = GcAction::RemoveDirectory;
  std::string path;
  uint64_t bytes = 0;
  std::string run_dir;  // the run's directory (the path itself for RemoveDirectory)
};

struct GcPlan {
  std::vector<GcItem> items;
  std::vector<std::string> kept;  // "run 3: <checkpoint>: F1's repro resumes from it"
  uint64_t bytes() const;
};

// The directory a run wrote to: the one the store kept; for a run stored before it kept them, the
// trainer's --out, else the run-<id> folder its command line or its checkpoints name (`events`:
// its checkpoint events are enough); "" when it cannot be told (gc then leaves the run alone).
std::string run_directory(const store::RunInfo& run, const std::vector<EventRecord>& events);

GcPlan plan_gc(const store::Store& store, const GcOptions& options);

// Removes what the plan lists; a kept directory that lost checkpoints gets a note
// (kPrunedNote) saying which. Returns what could not be removed, one line each.
std::vector<std::string> apply_gc(const GcPlan& plan);

// "1.2 MB", "512 B".
std::string format_bytes(uint64_t bytes);

}  // namespace faultline::harness
