// Test support: run the real `faultline` binary on a scratch store and work directory, and pick
// out its --json document.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/process.hpp"

namespace faultline::testing {

struct Cli {
  ProcessResult result;
  nlohmann::json doc;  // the --json document (last stdout line that parses)
};

// `faultline ARGS --db DIR/faultline.db`, plus --work-dir and --trainer for the commands that
// run trainers. `kill_when` as in ProcessSpec.
Cli faultline_cli(std::vector<std::string> args, const std::string& dir, double timeout_s = 120,
                  std::function<bool()> kill_when = {});

}  // namespace faultline::testing
