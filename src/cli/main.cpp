// Entry point of `faultline`: describe the command line, parse it (the chosen subcommand runs
// during parsing), and turn every error into one message and an exit code.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <exception>

#include "cli/bisect_commits_command.hpp"
#include "cli/data_command.hpp"
#include "cli/isolate_commands.hpp"
#include "cli/run_commands.hpp"
#include "common/error.hpp"

namespace {

// Exit codes: 0 success, 1 a bug in faultline, 2 a problem with the user's input.
constexpr int kExitInternal = 1;
constexpr int kExitUser = 2;

int report(const faultline::UserError& error) {
  for (const auto& item : error.items())
    fmt::print(stderr, "{}\n", faultline::format_error("faultline", item));
  return kExitUser;
}

}  // namespace

int main(int argc, char** argv) {
  // 1. Describe the command line; each group of subcommands registers itself.
  CLI::App app{"faultline: finds where LLM training goes wrong", "faultline"};
  app.require_subcommand(1);
  int exit_code = 0;  // set by the subcommand that ran
  faultline::cli::add_data_commands(app);
  faultline::cli::add_run_commands(app, exit_code);
  auto* bisect = faultline::cli::add_isolate_commands(app, exit_code);
  faultline::cli::add_bisect_commits_command(*bisect, exit_code);

  // 2. Parse and run, 3. report: user errors are caught here and nowhere else.
  try {
    app.parse(argc, argv);
    return exit_code;
  } catch (const CLI::ParseError& error) {
    // --help arrives as a ParseError with exit code 0; everything else is a usage mistake.
    return app.exit(error) == 0 ? 0 : kExitUser;
  } catch (const faultline::UserError& error) {
    return report(error);
  } catch (const std::exception& error) {
    fmt::print(stderr, "faultline: internal error: {}\n", error.what());
    return kExitInternal;
  }
}
