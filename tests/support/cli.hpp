// Test support: run the real `faultline` binary on a scratch store and work directory, and pick
// out its --json document.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/process.hpp"

namespace faultline::testing {

struct Cli {
  ProcessResult result;
  nlohmann::json doc;  // the --json document (last stdout line that parses)
};

// Whether the detectors that judge wall-clock time (straggler, data_stall, slow) run. Off for
// tests that are not about timing: on a loaded machine their verdicts are about the machine.
enum class TimingDetectors { Off, On };

// `faultline ARGS --db DIR/faultline.db`, plus --work-dir and --trainer for the commands that
// run trainers, and with TimingDetectors::Off `--detectors tests/e2e/recipes/
// no_timing_detectors.toml` unless ARGS name a detector file. `kill_when` as in ProcessSpec.
Cli faultline_cli(std::vector<std::string> args, const std::string& dir, double timeout_s = 120,
                  std::function<bool()> kill_when = {},
                  TimingDetectors timing = TimingDetectors::Off);

// The argv faultline_cli runs, for a test that needs a ProcessSpec of its own (signal_when).
std::vector<std::string> faultline_argv(std::vector<std::string> args, const std::string& dir,
                                        TimingDetectors timing = TimingDetectors::Off);

// A finished faultline process with its --json document picked out.
Cli cli_of(ProcessResult result);

// Ctrl-C, for a ProcessSpec's signal_when: SIGINT once, as soon as a run in the store at `db` is
// running and has stored step `step` or a later one; `sent` (the caller's, which must outlive the
// process) says whether it was sent.
std::function<int()> interrupt_past_step(const std::string& db, int64_t step, bool& sent);

// ARGS with `--set KEY=VALUE` for each of `sets` appended.
std::vector<std::string> with_sets(std::vector<std::string> args,
                                   const std::vector<std::string>& sets);

}  // namespace faultline::testing
