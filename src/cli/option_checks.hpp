// CLI11 validators for the numbers options take, with messages in faultline's words: CLI11's own
// PositiveNumber prints its range as doubles 300 digits long, and an option left unchecked took
// `--steps -3` or `--ranks 0` as "not given" and ran the default.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

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

}  // namespace faultline::cli
