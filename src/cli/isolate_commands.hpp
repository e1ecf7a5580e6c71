// `faultline isolate`, `faultline bisect steps|data|config`, `faultline repro`,
// `faultline findings`: the search commands and the findings they store.
#pragma once

namespace CLI {
class App;
}

namespace faultline::cli {

// Registers the commands; returns the `bisect` command so other axes (commits) can join it.
CLI::App* add_isolate_commands(CLI::App& app, int& exit_code);

}  // namespace faultline::cli
