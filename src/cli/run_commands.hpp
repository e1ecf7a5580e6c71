// `faultline train`, `faultline smoke`, `faultline runs`, `faultline show`: supervised trainer
// runs stored in SQLite, and the golden-rule smoke gate.
#pragma once

namespace CLI {
class App;
}

namespace faultline::cli {

// Exit codes of result commands (docs/cli.md).
enum class ExitCode : int { Ok = 0, Failed = 1, BadInput = 2, NotReproduced = 3, Infra = 4 };

// Registers the commands; the one that runs stores its exit code in `exit_code`.
void add_run_commands(CLI::App& app, int& exit_code);

}  // namespace faultline::cli
