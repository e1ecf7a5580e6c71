// Entry point of `faultline`: describe the command line, parse it (the chosen subcommand runs
// during parsing), and turn every error into one message and an exit code.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <cstring>
#include <exception>

#include "cli/bisect_commits_command.hpp"
#include "cli/browse_commands.hpp"
#include "cli/data_command.hpp"
#include "cli/error_output.hpp"
#include "cli/gpu_commands.hpp"
#include "cli/import_command.hpp"
#include "cli/isolate_commands.hpp"
#include "cli/option_checks.hpp"
#include "cli/reference_command.hpp"
#include "cli/report_command.hpp"
#include "cli/run_commands.hpp"
#include "cli/run_context.hpp"
#include "cli/version.hpp"
#include "common/error.hpp"
#include "harness/contract/trainer_contract.hpp"

int main(int argc, char** argv) {
  using namespace faultline::cli;
  // 1. Describe the command line; each group of subcommands registers itself. The options every
  // command shares are accepted before the subcommand too (`faultline --db x.db runs`).
  CLI::App app{"faultline: finds where LLM training goes wrong", "faultline"};
  int exit_code = 0;  // set by the subcommand that ran
  bool version = false;
  app.add_flag("--version", version, "print the version, git commit, LibTorch and BLAS");
  add_context_options(app);
  add_data_commands(app, exit_code);
  add_run_commands(app, exit_code);
  add_runs_commands(app);
  add_import_command(app, exit_code);
  add_reference_commands(app, exit_code);
  add_report_command(app, exit_code);
  add_check_commands(app);
  auto* bisect = add_isolate_commands(app, exit_code);
  add_bisect_commits_command(*bisect, exit_code);
  add_export_commands(app);
  add_gc_command(app);
  app.require_subcommand(0, 1);

  // 2. The trainer contract's variables in this shell (a job script's, exported for the helper)
  // are not passed on: every trial is given exactly the ones it asks.
  faultline::harness::contract::forget_inherited_trial_variables();

  // 3. Parse and run, 4. report: user errors are caught here and nowhere else. With --json a
  // failure is still one JSON document on stdout.
  bool json = false;
  for (int i = 1; i < argc; ++i) json = json || std::strcmp(argv[i], "--json") == 0;
  ErrorOutput errors{json ? ErrorFormat::Json : ErrorFormat::Text};
  try {
    app.parse(argc, argv);
    if (version) return print_version();
    if (app.get_subcommands().empty()) throw CLI::RequiredError("A subcommand");
    return exit_code;
  } catch (const CLI::ParseError& error) {
    // --help arrives as a ParseError with exit code 0; everything else is a usage mistake.
    if (error.get_exit_code() == 0) return app.exit(error);
    if (app.get_subcommands().empty())
      if (auto unknown = unknown_command(app, std::vector<std::string>(argv + 1, argv + argc)))
        return errors.usage("unknown command '" + unknown->word + "'", unknown->hint);
    return errors.usage(error.what(), usage_hint(app));
  } catch (const faultline::UserError& error) {
    return errors.user(error);
  } catch (const std::exception& error) {
    return errors.internal(error.what());
  }
}
