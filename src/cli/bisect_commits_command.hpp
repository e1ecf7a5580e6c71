// `faultline bisect commits`: which commit made the test or the recipe go bad (git bisect run
// with worktrees, a store-backed cache and an optional flake-aware search).
#pragma once

namespace CLI {
class App;
}

namespace faultline::cli {

// Registers `commits` under the `bisect` command; the exit code of a run goes to `exit_code`.
void add_bisect_commits_command(CLI::App& bisect, int& exit_code);

}  // namespace faultline::cli
