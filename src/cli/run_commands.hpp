// `faultline train`, `faultline smoke`, `faultline runs`, `faultline show`: supervised trainer
// runs stored in SQLite, and the golden-rule smoke gate.
#pragma once

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

// Registers the commands; the one that runs stores its exit code in `exit_code`.
void add_run_commands(CLI::App& app, int& exit_code);

}  // namespace faultline::cli
