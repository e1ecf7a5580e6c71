// CLI11 validators for the numbers options take, with messages in faultline's words: CLI11's own
// PositiveNumber prints its range as doubles 300 digits long, and an option left unchecked took
// `--steps -3` or `--ranks 0` as "not given" and ran the default.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

namespace faultline::cli {

// An integer of at least `min` (counts, ids, ranks, steps).
CLI::Validator at_least(long long min);

// An integer in [min, max].
CLI::Validator between(long long min, long long max);

// A number above zero (seconds).
CLI::Validator above_zero();

// A number of zero or more (tolerances).
CLI::Validator not_negative();

// The usage line of a command-line mistake: `<what> (command line)` and where to read more, for
// the deepest subcommand that was parsed (`faultline train --help`).
std::string usage_hint(const CLI::App& app);

// The word where a command was expected that names none (`faultline trian -c tiny`), with a
// did-you-mean; nullopt when the command line names one or none at all. Options before the command
// (`--db x.db`) and their values are stepped over.
struct UnknownCommand {
  std::string word;
  std::string hint;
};
std::optional<UnknownCommand> unknown_command(const CLI::App& app,
                                              const std::vector<std::string>& words);

}  // namespace faultline::cli
