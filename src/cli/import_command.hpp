// `faultline import DIR [--ranks N]`: store a run faultline did not launch, judged by the
// detectors, so that `isolate --run` can start from its own checkpoints.
#pragma once

namespace CLI {
class App;
}

namespace faultline::cli {

// Registers the command; when it runs it stores its exit code in `exit_code`.
void add_import_command(CLI::App& app, int& exit_code);

}  // namespace faultline::cli
