// Which stored runs `faultline runs` lists: a run's origin (the user's train, smoke, import,
// repro; or a trial some search ran) read from the parent it was stored with, and the filters.
#pragma once

#include <optional>
#include <string>

#include "common/duration.hpp"
#include "store/store.hpp"

namespace faultline::harness {

// The user's own runs, and the trials a search (isolate, bisect) ran on its way.
enum class RunOrigin { Train, Smoke, Import, Repro, SearchTrial };
const char* to_string(RunOrigin origin);
// From RunInfo::parent: "train", "smoke", "import:<dir>", "repro:F3"; anything else (isolate,
// isolate:baseline, bisect-commits:<sha>, or the "" of a trial replaying a stored run) is a
// search's trial.
RunOrigin origin_of(const std::string& parent);

enum class TrialsShown { Hidden, Shown };
enum class VerdictsShown { All, FailedOnly };  // FailedOnly: verdict fail or infra_error

struct RunFilter {
  VerdictsShown verdicts = VerdictsShown::All;
  std::string recipe;                      // "" or a recipe name (file stem) or path
  std::optional<Clock::time_point> since;  // started at or after
  TrialsShown trials = TrialsShown::Hidden;
};

bool matches(const store::RunInfo& run, const RunFilter& filter);

// "tiny" for ".../recipes/train/tiny.toml".
std::string recipe_name(const std::string& config_path);

}  // namespace faultline::harness
