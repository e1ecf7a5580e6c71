// The failure kinds of DESIGN.md as one enum: parsed and printed here only, so a kind is never a
// string compared in place. A trainer's own anomaly kinds are `anomaly`, the name in the detail.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace faultline::detectors {

enum class FailureKind {
  Nonfinite,
  Data,  // a token id outside the vocabulary (the trainer's `data` anomaly)
  LossSpike,
  Stalled,
  GradExplode,
  GradVanish,
  LrAnomaly,
  Memory,
  Slow,
  Straggler,
  DataStall,
  RankDivergence,
  Nondeterministic,
  Crash,
  Hang,
  Oom,
  Anomaly,         // an anomaly record of a kind this list does not have
  LossRegression,  // the smoothed loss worse than a reference's seed band (reference.hpp)
  BadInit,         // a language model's first loss far above ln(vocab size): a warning
  SlowComm,        // a rank's NCCL kernels far longer than its peers' (gpu records): a warning
  TeardownCrash,   // a rank died after its end event said training ended well: a warning
};

// A warning is reported with the run but does not fail it: the run may still train well.
enum class Severity { Failure, Warning };

const char* to_string(FailureKind kind);
std::optional<FailureKind> parse_failure_kind(std::string_view name);
// Every name, in the order above (for help texts and did-you-mean).
std::vector<std::string> failure_kind_names();

Severity severity(FailureKind kind);
const char* to_string(Severity severity);  // "failure" or "warning"
// What to look at for a kind whose cause is usually in the config ("" when none is known).
const char* hint(FailureKind kind);
// The same for a kind by its stored name ("" too for a name that is no kind).
const char* hint(std::string_view kind_name);

// Judged from timings: on a busy machine one run is not evidence enough (DESIGN.md).
bool is_timing(FailureKind kind);
// Judged on the loss curve against a reference run (loss_regression): no one step is to blame,
// and a run on other data or from a checkpoint is not comparable with the reference.
bool is_curve(FailureKind kind);
// Seen at its own step: a run cut right after that step shows it (a streak, a leak or a window
// is dated by its start but shown later: see Failure::shown_by).
bool is_seen_at_its_step(FailureKind kind);
// Lower is better localized: a step-exact signal beats a symptom seen later.
int localization_rank(FailureKind kind);

void to_json(nlohmann::json& json, FailureKind kind);
void from_json(const nlohmann::json& json, FailureKind& kind);

}  // namespace faultline::detectors
