// `faultline data ...`: make and examine tokenized shard files (synth, prepare, inspect).
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace faultline::cli {

// Registers `data synth`, `data prepare` and `data inspect` under `app`. Their callbacks throw
// faultline::UserError on bad input; main() reports it. `data inspect --json` sets `exit_code`.
void add_data_commands(CLI::App& app, int& exit_code);

// `data inspect PATH [--json]`, kept apart from the writers because it only reads.
enum class InspectFormat { Table, Json };
// Returns the exit code; a table's errors are thrown, a JSON document's printed to stderr.
int inspect_shards(const std::string& path, InspectFormat format);

}  // namespace faultline::cli
