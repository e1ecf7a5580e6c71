// `faultline train`, `faultline smoke`: supervised trainer runs stored in SQLite, and the
// golden-rule smoke gate; what the commands that print runs share.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "probes/detectors/failure.hpp"
#include "store/store.hpp"

namespace CLI {
class App;
}

namespace faultline::cli {

// Exit codes of result commands (docs/cli.md).
// What `faultline` exits with (docs/cli.md): a gate reads 1 as a caught training fault, so a bug
// in faultline itself has a code of its own (70, EX_SOFTWARE of sysexits.h).
enum class ExitCode : int {
  Ok = 0,
  Failed = 1,
  BadInput = 2,
  NotReproduced = 3,
  Infra = 4,
  Internal = 70
};

// A run's failures as --json prints them, and as the text lines under a run; its malformed
// metrics lines, by rank (`train` and `import`).
nlohmann::json failures_json(const std::vector<detectors::Failure>& failures);
void print_failures(const std::vector<detectors::Failure>& failures);
void print_malformed(const std::vector<store::RankMalformed>& malformed);

// A loss as --json prints it: null when absent or not finite.
nlohmann::json finite_or_null(const std::optional<double>& value);

// Registers the commands; the one that runs stores its exit code in `exit_code`.
void add_run_commands(CLI::App& app, int& exit_code);

}  // namespace faultline::cli
