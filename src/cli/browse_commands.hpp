// The commands that browse the store and run nothing: `runs`, `show RUN`, `export`, `diff`,
// `gc` (docs/cli.md, "Browsing the store").
#pragma once

#include <cstdint>
#include <string>

#include "store/store.hpp"

namespace CLI {
class App;
}

namespace faultline::cli {

// `runs` and `show` (a run here; a finding in finding_report.cpp).
void add_runs_commands(CLI::App& app);
// `export` and `diff`.
void add_export_commands(CLI::App& app);
void add_gc_command(CLI::App& app);

// A stored run by the id given on the command line, or a UserError naming it.
store::RunInfo load_run(const store::Store& store, const std::string& given);

}  // namespace faultline::cli
